package magpie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cases from Colly's own test suite that a Colly program may rely on.

// TestBaseHrefTabsAndNewlines: the WHATWG URL parser drops tabs and newlines
// from the <base href> as well as from the link, as browsers do.
func TestBaseHrefTabsAndNewlines(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><base href=\"/foo\tbar/\"></head><body><a href=\"x\ny\">x</a></body></html>")
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt())
	var got string
	c.OnHTML("a[href]", func(e *HTMLElement) { got = e.Request.AbsoluteURL(e.Attr("href")) })
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if want := ts.URL + "/foobar/xy"; got != want {
		t.Errorf("AbsoluteURL under <base href=\"/foo\\tbar/\"> = %q, want %q", got, want)
	}
}

// TestStdlibContextDeadlineIsBare: a fetch ended by its context's deadline
// reports context.DeadlineExceeded itself, not wrapped, to OnError and Visit
// (Colly's tests compare with ==).
func TestStdlibContextDeadlineIsBare(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	}))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	c := NewCollector(StdlibContext(ctx), IgnoreRobotsTxt())
	var mu sync.Mutex
	var onErr []error
	c.OnError(func(_ *Response, err error) {
		mu.Lock()
		onErr = append(onErr, err)
		mu.Unlock()
	})
	c.OnResponse(func(*Response) { t.Error("OnResponse called, want OnError") })
	if err := c.Visit(ts.URL + "/slow"); err != context.DeadlineExceeded {
		t.Errorf("Visit() error = %#v, want context.DeadlineExceeded itself", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(onErr) != 1 || onErr[0] != context.DeadlineExceeded {
		t.Errorf("OnError errors = %#v, want [context.DeadlineExceeded] itself", onErr)
	}
}

// onceReader is an io.Reader that is not an io.Seeker.
type onceReader struct{ r io.Reader }

func (o *onceReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestRetryUnseekableBody: Colly's Retry of a POST whose body is not an
// io.Seeker returns ErrRetryBodyUnseekable; magpie reads the body once when
// the request is made (it is part of the visited key), so Retry sends the
// same body again. The README's Colly table says so.
func TestRetryUnseekableBody(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt())
	var retryErr error
	retried := false
	c.OnError(func(r *Response, err error) {
		if !retried {
			retried = true
			retryErr = r.Request.Retry()
		}
	})
	var ok int
	c.OnResponse(func(*Response) { ok++ })
	_ = c.Request(http.MethodPost, ts.URL+"/form", &onceReader{strings.NewReader("name=magpie")}, nil, nil)
	c.Wait()
	if retryErr != nil {
		t.Fatalf("Retry() of an unseekable body error = %v, want nil (the body is kept)", retryErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[0] != "name=magpie" || bodies[1] != "name=magpie" {
		t.Errorf("server got bodies %q, want the same body twice", bodies)
	}
	if ok != 1 {
		t.Errorf("OnResponse called %d times, want 1 (the retry succeeded)", ok)
	}
}

// TestDelayPerSlotOverlaps: LimitRule.DelayPerSlot gives Colly's spacing
// end to end: with Parallelism 4 and a Delay, 4 requests to one host are in
// flight together (each slot waits the Delay after its own request).
func TestDelayPerSlotOverlaps(t *testing.T) {
	const par = 4
	var mu sync.Mutex
	inflight, most := 0, 0
	all := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		if inflight == par {
			close(all)
		}
		mu.Unlock()
		// The first par requests wait for each other: they are answered
		// only once all are in flight (or after a generous bound, and the
		// test then fails on most).
		select {
		case <-all:
		case <-time.After(30 * time.Second):
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: par, Delay: 50 * time.Millisecond, DelayPerSlot: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * par {
		if err := c.Visit(fmt.Sprintf("%s/%d", ts.URL, i)); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
	}
	c.Wait()
	mu.Lock()
	defer mu.Unlock()
	if most != par {
		t.Errorf("most requests in flight = %d, want %d (DelayPerSlot overlaps Parallelism requests)", most, par)
	}
}

// TestNonHTTPLinksAreRefusals: mailto: and tel: links are refused before any
// fetch (OnRefused, counted under RefusedScheme), not failed requests: Colly
// sends them to the HTTP client and reports an error.
func TestNonHTTPLinksAreRefusals(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="mailto:someone@example.com">m</a><a href="tel:+3312345678">t</a>`)
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt())
	var refused []error
	var failed []error
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnRefused(func(_ *Request, err error) { refused = append(refused, err) })
	c.OnError(func(_ *Response, err error) { failed = append(failed, err) })
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if len(failed) != 0 {
		t.Errorf("OnError got %v, want nothing", failed)
	}
	if len(refused) != 2 {
		t.Fatalf("OnRefused got %v, want the mailto: and tel: links", refused)
	}
	for _, err := range refused {
		if !errors.Is(err, ErrUnsupportedScheme) {
			t.Errorf("OnRefused error = %v, want ErrUnsupportedScheme", err)
		}
	}
	if n := c.Stats().Refused[RefusedScheme]; n != 2 {
		t.Errorf("Stats().Refused[RefusedScheme] = %d, want 2", n)
	}
}
