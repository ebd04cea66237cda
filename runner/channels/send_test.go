package channels_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"svc/runner/channels"
)

func TestStatusError(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter time.Duration
		retryable  bool
		wantAfter  time.Duration
	}{
		{http.StatusTooManyRequests, 7 * time.Second, true, 7 * time.Second},
		{http.StatusTooManyRequests, 0, true, time.Second},
		{http.StatusInternalServerError, 0, true, 0},
		{http.StatusBadGateway, 0, true, 0},
		{http.StatusRequestTimeout, 0, true, 0},
		{http.StatusBadRequest, 0, false, 0},
		{http.StatusForbidden, 0, false, 0},
		{http.StatusNotFound, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			e := channels.StatusError("sendMessage", tt.status, "boom", tt.retryAfter)
			if e.Retryable != tt.retryable || e.RetryAfter != tt.wantAfter || e.Status != tt.status {
				t.Errorf("StatusError(%d) = %+v, want retryable %v after %s", tt.status, e, tt.retryable, tt.wantAfter)
			}
			if !strings.Contains(e.Error(), "sendMessage") || !strings.Contains(e.Error(), "boom") {
				t.Errorf("Error() = %q, want the method and the message", e.Error())
			}
		})
	}
}

func TestNetworkErrorDropsURL(t *testing.T) {
	cause := &url.Error{Op: "Post", URL: "https://api.telegram.org/bot123:SECRET/sendMessage", Err: context.Canceled}
	e := channels.NetworkError("sendMessage", cause)
	if strings.Contains(e.Error(), "SECRET") {
		t.Errorf("Error() = %q names the URL and its token", e.Error())
	}
	if !e.Retryable || !errors.Is(e, context.Canceled) {
		t.Errorf("NetworkError = %+v, want retryable and matching context.Canceled", e)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{" 2 ", 2 * time.Second},
		{"-4", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := channels.ParseRetryAfter(tt.value, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", tt.value, got, tt.want)
		}
	}
}

func TestNewRequest(t *testing.T) {
	req, err := channels.NewRequest("chat.postMessage", map[string]string{"channel": "C1"})
	if err != nil || req.Method != "chat.postMessage" || string(req.Body) != `{"channel":"C1"}` || req.IdempotencyKey != "" {
		t.Errorf("NewRequest = %+v, %v", req, err)
	}
	if _, err := channels.NewRequest("x", func() {}); err == nil {
		t.Error("NewRequest of a func: no error")
	}
}
