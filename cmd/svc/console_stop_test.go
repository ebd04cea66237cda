package main

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleBrowserStops: once a test with a browser ends, no goroutine of chromedp is left
// (the browser process is waited for and its readers end with it).
func TestConsoleBrowserStops(t *testing.T) {
	t.Run("browser", func(t *testing.T) {
		b := newBrowser(t)
		b.run("open a page", 30*time.Second, chromedp.Navigate("about:blank"))
	})
	var left string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		left = ""
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "github.com/chromedp/") {
				left += g + "\n\n"
			}
		}
		if left == "" {
			return
		}
	}
	t.Errorf("goroutines of chromedp outlive the test:\n%s", left)
}
