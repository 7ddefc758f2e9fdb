package debug

import (
	_ "embed"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultWebAddress is where a WebDebugger listens when Address is empty:
// the loopback interface only, so a crawl's details are not served to the
// network by accident.
const DefaultWebAddress = "127.0.0.1:7676"

// Defaults for the WebDebugger's bounds.
const (
	// DefaultRecent is how many finished requests the page keeps.
	DefaultRecent = 200
	// maxCurrent bounds requests shown as in flight: a request aborted in
	// OnRequest sends no closing event, and must not stay forever.
	maxCurrent = 10000
)

// ErrWebDebuggerClosed is returned by Init when the WebDebugger was closed.
var ErrWebDebuggerClosed = errors.New("debug: web debugger closed")

// WebDebugger serves a small live web page of the requests in flight and
// the most recent finished ones, with the same data as JSON at /status. It
// listens on its own server, not http.DefaultServeMux, and keeps a bounded
// log. Set the fields before attaching it; Init starts the server and Close
// stops it (the caller owns it and must Close it). Safe for concurrent use.
type WebDebugger struct {
	// Address is the listen address (DefaultWebAddress when empty; use
	// "127.0.0.1:0" for a free port and read it back with Addr).
	Address string
	// Recent is how many finished requests are kept (DefaultRecent when 0).
	Recent int

	// mu guards every field below.
	mu      sync.Mutex
	current map[requestKey]*RequestRecord
	recent  []*RequestRecord // ring, oldest first once full
	next    int              // next slot in recent once it is full
	total   int
	ln      net.Listener
	srv     *http.Server
	served  chan struct{} // closed when the server goroutine returns
	closed  bool
}

type requestKey struct{ collector, request uint32 }

// RequestRecord is one request as the WebDebugger shows it.
type RequestRecord struct {
	CollectorID uint32        `json:"collector_id"`
	RequestID   uint32        `json:"request_id"`
	URL         string        `json:"url"`
	Method      string        `json:"method,omitempty"`
	Depth       string        `json:"depth,omitempty"`
	Started     time.Time     `json:"started"`
	Duration    time.Duration `json:"duration_ns,omitempty"`
	Status      string        `json:"status,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// WebStatus is the JSON document served at /status.
type WebStatus struct {
	// Current are the requests started and not finished, oldest first.
	Current []RequestRecord `json:"current"`
	// Recent are the last finished requests, newest first.
	Recent []RequestRecord `json:"recent"`
	// Finished counts every finished request since Init.
	Finished int `json:"finished"`
}

//go:embed web.html
var webPage []byte

// Init starts the server. It fails if the address cannot be listened on or
// the debugger was closed; calling it again while it serves does nothing.
func (w *WebDebugger) Init() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrWebDebuggerClosed
	}
	if w.ln != nil {
		return nil
	}
	addr := w.Address
	if addr == "" {
		addr = DefaultWebAddress
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = rw.Write(webPage)
	})
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.Status())
	})
	w.current = make(map[requestKey]*RequestRecord)
	w.ln = ln
	w.srv = &http.Server{Handler: hostCheck(addr, mux), ReadHeaderTimeout: 10 * time.Second}
	w.served = make(chan struct{})
	go func(srv *http.Server, served chan struct{}) {
		defer close(served)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
	}(w.srv, w.served)
	return nil
}

// hostCheck answers only requests whose Host header names a loopback
// address, localhost or the configured address's host, with 403 otherwise:
// a web page on another site could otherwise read the crawl's URLs through
// DNS rebinding (a name of the attacker's that resolves to 127.0.0.1).
func hostCheck(configured string, next http.Handler) http.Handler {
	own, _, err := net.SplitHostPort(configured)
	if err != nil {
		own = configured
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !allowedHost(r.Host, own) {
			http.Error(rw, "debug: Host not allowed (the web debugger answers loopback, localhost and its own address)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// allowedHost reports whether a Host header names the debugger itself.
func allowedHost(host, own string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Unmap().IsLoopback() {
			return true
		}
		if o, err := netip.ParseAddr(strings.Trim(own, "[]")); err == nil && !o.IsUnspecified() {
			return o.Unmap() == a.Unmap()
		}
		return false
	}
	return own != "" && strings.EqualFold(host, strings.TrimSuffix(own, "."))
}

// Addr is the address the server listens on, or "" before Init.
func (w *WebDebugger) Addr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ln == nil {
		return ""
	}
	return w.ln.Addr().String()
}

// Close stops the server and waits for it. Events sent after Close are
// still recorded but no longer served.
func (w *WebDebugger) Close() error {
	w.mu.Lock()
	w.closed = true
	srv, served := w.srv, w.served
	w.srv = nil
	w.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-served
	return err
}

// Event records e: a request event opens a record, a response or error
// closes it.
func (w *WebDebugger) Event(e *Event) {
	key := requestKey{e.CollectorID, e.RequestID}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current == nil {
		w.current = make(map[requestKey]*RequestRecord)
	}
	switch e.Type {
	case EventRequest:
		if len(w.current) >= maxCurrent {
			w.evictOldest()
		}
		w.current[key] = &RequestRecord{
			CollectorID: e.CollectorID, RequestID: e.RequestID,
			URL: e.Values["url"], Method: e.Values["method"], Depth: e.Values["depth"],
			Started: now,
		}
	case EventResponse, EventError:
		rec, ok := w.current[key]
		if !ok {
			rec = &RequestRecord{CollectorID: e.CollectorID, RequestID: e.RequestID, URL: e.Values["url"], Started: now}
		}
		delete(w.current, key)
		rec.Duration = now.Sub(rec.Started)
		rec.Status = e.Values["status"]
		rec.Error = e.Values["error"]
		w.finish(rec)
	}
}

func (w *WebDebugger) evictOldest() {
	var oldest requestKey
	var at time.Time
	for k, r := range w.current {
		if at.IsZero() || r.Started.Before(at) {
			oldest, at = k, r.Started
		}
	}
	delete(w.current, oldest)
}

// finish adds rec to the ring of recent requests.
func (w *WebDebugger) finish(rec *RequestRecord) {
	limit := w.Recent
	if limit <= 0 {
		limit = DefaultRecent
	}
	w.total++
	if len(w.recent) < limit {
		w.recent = append(w.recent, rec)
		return
	}
	w.recent[w.next%len(w.recent)] = rec
	w.next = (w.next + 1) % len(w.recent)
}

// Status returns what the page shows: a copy, safe to keep.
func (w *WebDebugger) Status() WebStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := WebStatus{Current: make([]RequestRecord, 0, len(w.current)), Recent: make([]RequestRecord, 0, len(w.recent)), Finished: w.total}
	for _, r := range w.current {
		st.Current = append(st.Current, *r)
	}
	slices.SortFunc(st.Current, func(a, b RequestRecord) int { return a.Started.Compare(b.Started) })
	// The ring's oldest entry is at next; walk it backwards for newest first.
	n := len(w.recent)
	for i := range n {
		st.Recent = append(st.Recent, *w.recent[(w.next-1-i+2*n)%n])
	}
	return st
}

// String names the debugger and its address, for logs.
func (w *WebDebugger) String() string {
	return "WebDebugger(" + strconv.Quote(w.Addr()) + ")"
}
