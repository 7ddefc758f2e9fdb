package magpie

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/debug"
)

// fanout sends events to several debuggers.
type fanout []debug.Debugger

func (f fanout) Init() error {
	for _, d := range f {
		if err := d.Init(); err != nil {
			return err
		}
	}
	return nil
}

func (f fanout) Event(e *debug.Event) {
	for _, d := range f {
		d.Event(e)
	}
}

// lockedBuffer is a bytes.Buffer safe for the engine's workers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStartURLPasswordRedacted: a start URL with user:password (inherited by
// the links resolved against it) never shows its password in slog lines,
// debugger events (log and web debuggers) or error texts; the server still
// gets the credentials.
func TestStartURLPasswordRedacted(t *testing.T) {
	const secret = "s3cretPW"
	var authOK sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); ok && u == "user" && p == secret {
			authOK.Store(r.URL.Path, true)
		}
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/child">c</a><a href="/fail">f</a><p>x</p>`)
		case "/fail":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<p>child</p>`)
		}
	}))
	defer srv.Close()
	start := strings.Replace(srv.URL, "http://", "http://user:"+secret+"@", 1) + "/"

	var logs, debugLines lockedBuffer
	web := &debug.WebDebugger{Address: "127.0.0.1:0"}
	c := NewCollector(IgnoreRobotsTxt(),
		Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		Debugger(fanout{&debug.LogDebugger{Output: &debugLines}, web}))
	defer web.Close()
	var errTexts []string
	var mu sync.Mutex
	keep := func(err error) {
		if err != nil {
			mu.Lock()
			errTexts = append(errTexts, err.Error())
			mu.Unlock()
		}
	}
	c.OnError(func(_ *Response, err error) { keep(err) })
	c.OnRefused(func(_ *Request, err error) { keep(err) })
	c.OnHTML("a[href]", func(e *HTMLElement) { keep(e.Request.Visit(e.Attr("href"))) })
	c.OnHTML("p", func(e *HTMLElement) {})
	if err := c.Visit(start); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	err := c.Visit(start) // already visited: the error names the URL
	var av *AlreadyVisitedError
	if !errors.As(err, &av) {
		t.Fatalf("second Visit() error = %v, want *AlreadyVisitedError", err)
	}
	keep(err)
	keep(c.VisitSitemap(strings.TrimSuffix(start, "/") + "/child")) // not a sitemap: ErrSitemapInvalid names it
	keep(c.Visit(strings.Replace(start, "http://", "ftp://", 1)))   // unsupported scheme names it

	status, _ := json.Marshal(web.Status())
	mu.Lock()
	defer mu.Unlock()
	texts := map[string]string{
		"slog":          logs.String(),
		"LogDebugger":   debugLines.String(),
		"WebDebugger":   string(status),
		"error strings": strings.Join(errTexts, "\n"),
	}
	for where, text := range texts {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the password:\n%s", where, text)
		}
		if !strings.Contains(text, "user:xxxxx@") {
			t.Errorf("%s does not show the redacted URL:\n%s", where, text)
		}
	}
	for _, p := range []string{"/", "/child", "/fail"} {
		if _, ok := authOK.Load(p); !ok {
			t.Errorf("%s was not fetched with the URL's credentials", p)
		}
	}
}
