package controlplane

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// The dashboard's page and assets, served as they are: no build step, and
// nothing loaded from another origin.
//
//go:embed web
var webFS embed.FS

// DefaultPollInterval is how often the dashboard reads the API unless
// DashboardConfig.PollInterval says otherwise.
const DefaultPollInterval = time.Second

// Bounds of DashboardConfig.PollInterval: faster than the lower one is load
// on the server for nothing a person sees; slower than the upper one is not
// live.
const (
	MinPollInterval = 100 * time.Millisecond
	MaxPollInterval = time.Minute
)

// DashboardConfig configures a Dashboard; its zero value is usable.
type DashboardConfig struct {
	// PollInterval is how often the page reads the registry, the latest
	// report and the alerts while it is visible; 0 means
	// DefaultPollInterval. A read that takes longer delays the next one:
	// the page never has two reads in flight.
	PollInterval time.Duration
}

// Validate reports what makes c unusable, or nil.
func (c *DashboardConfig) Validate() error {
	if c.PollInterval != 0 && (c.PollInterval < MinPollInterval || c.PollInterval > MaxPollInterval) {
		return fmt.Errorf("dashboard config: PollInterval is %v, want 0 (%v) or from %v to %v",
			c.PollInterval, DefaultPollInterval, MinPollInterval, MaxPollInterval)
	}
	return nil
}

// Dashboard serves the operator's live page: the registry as GET
// /api/hotkeys lists it, the latest cluster report, the recent alerts, and
// promote and demote forms that call the API with a bearer token the
// operator types (kept in the tab's sessionStorage only).
//
// It serves the page at "/" and its assets beside it, and nothing else:
// the caller mounts it at "/" of a mux that has the API (Server) at
// "/api/" and /metrics beside it. The page reads the API by relative URLs
// ("api/hotkeys"), so the three can also be mounted together under a
// prefix with http.StripPrefix.
//
// Every answer carries a Content-Security-Policy that allows scripts,
// styles and requests to the page's own origin only, no inline script or
// style, no framing, and requires Trusted Types, so the page cannot put
// strings into the DOM as HTML; and X-Content-Type-Options nosniff and
// Referrer-Policy no-referrer. An unknown path is a JSON 404, a method
// other than GET and HEAD a JSON 405, like the API's.
type Dashboard struct {
	files map[string]*asset
}

var _ http.Handler = (*Dashboard)(nil)

// asset is one file the dashboard serves, read and hashed once.
type asset struct {
	body        []byte
	contentType string
	// etag is a strong validator of body: a hash of it.
	etag string
	// version is the query value (?v=) the page names the asset with; a
	// request carrying it may be cached for good, since another body has
	// another version.
	version string
}

// NewDashboard validates cfg and builds the dashboard.
func NewDashboard(cfg DashboardConfig) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	d := &Dashboard{files: make(map[string]*asset)}
	err := fs.WalkDir(webFS, "web", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || p == "web/index.html" {
			return err
		}
		b, err := webFS.ReadFile(p)
		if err != nil {
			return err
		}
		d.files["/"+strings.TrimPrefix(p, "web/")] = newAsset(b, contentType(p))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: read the embedded page: %w", err)
	}
	page, err := d.renderIndex(cfg)
	if err != nil {
		return nil, err
	}
	d.files["/"] = newAsset(page, "text/html; charset=utf-8")
	return d, nil
}

func newAsset(b []byte, ct string) *asset {
	sum := sha256.Sum256(b)
	v := hex.EncodeToString(sum[:8])
	return &asset{body: b, contentType: ct, etag: `"` + v + `"`, version: v}
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".js":
		// mime's table depends on the system's files; the page's module
		// script must be served as JavaScript wherever it runs.
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if ct := mime.TypeByExtension(path.Ext(p)); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

// renderIndex fills index.html's template: each asset's URL with its
// version, and the poll interval, which the page reads from a meta
// element (no inline script may carry it).
func (d *Dashboard) renderIndex(cfg DashboardConfig) ([]byte, error) {
	tmpl, err := template.ParseFS(webFS, "web/index.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: parse index.html: %w", err)
	}
	data := struct {
		PollMs int64
		Asset  func(string) (string, error)
	}{
		PollMs: cfg.PollInterval.Milliseconds(),
		Asset: func(name string) (string, error) {
			a, ok := d.files["/"+name]
			if !ok {
				return "", fmt.Errorf("index.html names %q, which is not embedded", name)
			}
			return name + "?v=" + a.version, nil
		},
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("dashboard: render index.html: %w", err)
	}
	return buf.Bytes(), nil
}

// contentSecurityPolicy allows the page's own scripts, styles, images and
// API requests and nothing else. Trusted Types with no policy make every
// assignment of a string to innerHTML, outerHTML or document.write throw:
// keys are attacker-controlled, so the page builds its DOM from text
// nodes only, and the browser enforces it.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// ServeHTTP answers the page and its assets.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	a, ok := d.files[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, "no such page or asset; the dashboard is at /")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; allowed: GET, HEAD", sanitizeMethod(r.Method)))
		return
	}
	// The page is revalidated on every load (its ETag makes that a 304),
	// so a new build's page, naming its assets' new versions, shows at
	// once; an asset asked for by the version the page names never
	// changes, and one asked for otherwise is revalidated too.
	if r.URL.Path != "/" && r.URL.RawQuery == "v="+a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("ETag", a.etag)
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		h.Del("Content-Type")
		h.Del("Content-Length")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

// etagMatches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 wants for If-None-Match) or is "*".
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}
