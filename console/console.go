package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console"

// Config is what the console needs from the platform's settings.
type Config struct {
	// AppsDomain is the agents' domain as their URLs show it ("apps.localhost:8080"): the
	// playground connects to "<slug>.<AppsDomain>" and "<deployId>--<slug>.<AppsDomain>", so the
	// Content-Security-Policy allows those origins (http and https). Empty: "apps.localhost".
	AppsDomain string
}

// file is one embedded asset with what its responses need.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console: GET or HEAD of /console and /console/... An asset path
// (/console/assets/NAME) answers the embedded file or 404; any other path answers the app
// shell (index.html), whose script routes on the client. Every answer carries the security
// headers and an ETag (If-None-Match answers 304).
type Handler struct {
	files   map[string]file // by path under assets/
	csp     string
	version string // of every asset URL the shell and the modules name (versionURLs)
}

// New reads the embedded assets once and builds the Content-Security-Policy from cfg.
func New(cfg Config) (*Handler, error) {
	h := &Handler{files: map[string]file{}, csp: CSP(cfg.AppsDomain)}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the machine's mime tables
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := h.files["index.html"]; !ok {
		return nil, errors.New("console: assets/index.html is not embedded")
	}
	if err := h.preloadModules(); err != nil {
		return nil, err
	}
	h.version = h.versionURLs()
	return h, nil
}

// moduleImport is a relative import of a sibling module in an embedded script: static (from
// './x.js') or dynamic (import('./x.js')).
var moduleImport = regexp.MustCompile(`((?:from\s+|import\()'\./[A-Za-z0-9_-]+\.js)'`)

// staticImport is a static relative import; its group is the module's file name.
var staticImport = regexp.MustCompile(`from\s+'\./([A-Za-z0-9_-]+\.js)'`)

// entryModule is the shell's module script: the modules it imports statically, at any depth,
// are preloaded (preloadModules).
const entryModule = "app.js"

// preloadModules adds to the shell a <link rel="modulepreload"> for the entry module and each
// module it imports statically, at any depth, before the module script: the browser fetches and
// compiles them all at once instead of discovering them import by import. Made from the files,
// it cannot go stale; a module imported dynamically (the playground) is left to load when needed.
func (h *Handler) preloadModules() error {
	seen := map[string]bool{}
	var order []string
	var visit func(name string) error
	visit = func(name string) error {
		if seen[name] {
			return nil
		}
		f, ok := h.files[name]
		if !ok {
			return fmt.Errorf("console: a module imports %s, which is not embedded", name)
		}
		seen[name] = true
		order = append(order, name)
		for _, m := range staticImport.FindAllSubmatch(f.body, -1) {
			if err := visit(string(m[1])); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(entryModule); err != nil {
		return err
	}
	var links strings.Builder
	for _, name := range order {
		fmt.Fprintf(&links, "<link rel=\"modulepreload\" href=\"%s/assets/%s\">\n", Prefix, name)
	}
	shell := h.files["index.html"]
	script := `<script type="module" src="` + Prefix + "/assets/" + entryModule + `">`
	if !bytes.Contains(shell.body, []byte(script)) {
		return fmt.Errorf("console: index.html has no %s", script)
	}
	shell.body = bytes.Replace(shell.body, []byte(script), []byte(links.String()+script), 1)
	h.files["index.html"] = shell
	return nil
}

// versionURLs makes every asset URL the shell and the modules name carry ?v=<version>, a hash
// of all the files: such a URL is cached for good (immutable) and a new binary's files get new
// URLs, so a page load revalidates nothing but the shell. It answers the version.
func (h *Handler) versionURLs() string {
	names := make([]string, 0, len(h.files))
	for name := range h.files {
		names = append(names, name)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, name := range names {
		sum.Write([]byte(name))
		sum.Write(h.files[name].body)
	}
	version := hex.EncodeToString(sum.Sum(nil))[:12]
	for _, name := range names {
		f := h.files[name]
		switch {
		case name == "index.html":
			body := string(f.body)
			for _, asset := range names {
				body = strings.ReplaceAll(body, `"`+Prefix+"/assets/"+asset+`"`, `"`+Prefix+"/assets/"+asset+"?v="+version+`"`)
			}
			f.body = []byte(body)
		case strings.HasSuffix(name, ".js"):
			f.body = moduleImport.ReplaceAll(f.body, []byte("$1?v="+version+"'"))
		default:
			continue
		}
		s := sha256.Sum256(f.body)
		f.etag = `"` + hex.EncodeToString(s[:8]) + `"`
		h.files[name] = f
	}
	return version
}

// CSP is the Content-Security-Policy of every console answer: scripts, styles and images from the
// console itself only (no inline script), and connections to the platform and to the agents'
// hosts under appsDomain, whose runtimes the playground calls.
func CSP(appsDomain string) string {
	if appsDomain == "" {
		appsDomain = "apps.localhost"
	}
	connect := []string{"'self'"}
	for _, scheme := range []string{"http", "https"} {
		connect = append(connect, scheme+"://*."+appsDomain)
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + strings.Join(connect, " ") + "; " +
		"frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
}

// Match reports whether r is for the console: /console or a path under /console/.
func Match(r *http.Request) bool {
	return r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the console answers GET and HEAD only")
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	name := "index.html"
	if strings.HasPrefix(rest, "assets/") {
		name = strings.TrimPrefix(rest, "assets/")
		if name == "index.html" {
			name = "" // the shell has no asset URL of its own
		}
	}
	f, ok := h.files[name]
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no console asset "+rest)
		return
	}
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("ETag", f.etag)
	if name != "index.html" && r.URL.Query().Get("v") == h.version {
		// A versioned URL never changes its bytes (versionURLs).
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// Revalidate every time: the ETag makes that a 304 without a body, and a new binary's
		// files are picked up at once.
		hdr.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// writeError writes the platform's error envelope ({"error":{"code","message"}}); the console
// does not import the platform's catalog (it may import nothing of the platform).
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": message}})
	w.Write(append(b, '\n')) //nolint:errcheck // the client may be gone
}

// Wrap serves the console's paths with h and every other request with next.
func Wrap(h *Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Match(r) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Assets is the embedded files, rooted at the assets folder (for tests and tools).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // "assets" is a valid path: a programmer error
	}
	return sub
}
