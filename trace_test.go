package magpie

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
)

func TestTraceTimings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	do := func(req *http.Request) *HTTPTrace {
		t.Helper()
		ht := &HTTPTrace{}
		resp, err := client.Do(ht.WithTrace(req))
		if err != nil {
			t.Fatalf("Do() error = %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return ht
	}
	newReq := func() *http.Request {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}

	first := do(newReq())
	if first.ConnectDuration <= 0 {
		t.Errorf("first request ConnectDuration = %v, want > 0 (new connection)", first.ConnectDuration)
	}
	if first.FirstByteDuration <= 0 || first.FirstByteDuration < first.ConnectDuration {
		t.Errorf("first request FirstByteDuration = %v, want > 0 and >= ConnectDuration %v", first.FirstByteDuration, first.ConnectDuration)
	}

	second := do(newReq())
	if second.ConnectDuration != 0 {
		t.Errorf("reused connection ConnectDuration = %v, want 0", second.ConnectDuration)
	}
	if second.FirstByteDuration <= 0 {
		t.Errorf("reused connection FirstByteDuration = %v, want > 0", second.FirstByteDuration)
	}

	// A ClientTrace the caller already attached keeps working.
	var userSawFirstByte bool
	req := newReq()
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { userSawFirstByte = true },
	}))
	if third := do(req); third.FirstByteDuration <= 0 || !userSawFirstByte {
		t.Errorf("with a user trace: FirstByteDuration = %v, user hook ran = %v; want > 0, true", third.FirstByteDuration, userSawFirstByte)
	}
}

func TestTraceDoesNotModifyRequest(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	ht := &HTTPTrace{}
	got := ht.WithTrace(req)
	if got == req {
		t.Errorf("WithTrace() returned the same request, want a copy")
	}
	if httptrace.ContextClientTrace(req.Context()) != nil {
		t.Errorf("WithTrace() attached the trace to the original request")
	}
	if httptrace.ContextClientTrace(got.Context()) == nil {
		t.Errorf("WithTrace() returned a request without a trace")
	}
}
