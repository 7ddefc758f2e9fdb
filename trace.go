package magpie

import (
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// HTTPTrace holds connection timings of one request, filled when TraceHTTP is on.
//
// ConnectDuration is the time from the start of the TCP connect to its end
// (zero when a kept-alive connection was reused); FirstByteDuration is the
// time from asking the transport for a connection to the first byte of the
// response. The zero value is ready to use. Read the fields after the
// response headers arrived (http.Client.Do returned): the hooks run on the
// transport's goroutines and WithTrace's hooks synchronise among themselves,
// and Do's return orders them before the caller's reads.
type HTTPTrace struct {
	start, connect    time.Time
	ConnectDuration   time.Duration
	FirstByteDuration time.Duration

	// mu guards start, connect and the durations while hooks run; a
	// happy-eyeballs dial may start two connects at once.
	mu sync.Mutex
}

// WithTrace returns req with t's hooks attached to its context. Hooks
// already in the context (a user's own ClientTrace) still run.
func (t *HTTPTrace) WithTrace(req *http.Request) *http.Request {
	trace := &httptrace.ClientTrace{
		GetConn: func(string) {
			t.mu.Lock()
			t.start = time.Now()
			t.mu.Unlock()
		},
		ConnectStart: func(string, string) {
			t.mu.Lock()
			if t.connect.IsZero() {
				t.connect = time.Now()
			}
			t.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			if err != nil {
				return
			}
			t.mu.Lock()
			if !t.connect.IsZero() && t.ConnectDuration == 0 {
				t.ConnectDuration = time.Since(t.connect)
			}
			t.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			if !t.start.IsZero() {
				t.FirstByteDuration = time.Since(t.start)
			}
			t.mu.Unlock()
		},
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}
