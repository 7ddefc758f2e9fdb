package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestRetryFromOnResponseRace runs Retry from OnResponse many times: the
// original request and its retry copy finish on two analyzer goroutines and
// both record the outcome on the original. Under -race this failed about one
// run in 150 before the outcome was written under a lock. The sync Visit must
// return the last attempt's error.
func TestRetryFromOnResponseRace(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("fail") != "" && r.Header.Get("X-Attempt") == "2" {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	const rounds = 300
	for i := range rounds {
		// The callbacks wait for one another, so they must not take turns.
		c := NewCollector(IgnoreRobotsTxt(), ConcurrentCallbacks())
		var retried atomic.Bool
		// The original's OnResponse waits until the copy's has run, so that
		// both finish at about the same time on two analyzer goroutines.
		copyAnalyzed := make(chan struct{})
		c.OnRequest(func(r *Request) {
			if retried.Load() {
				r.Headers.Set("X-Attempt", "2")
			}
		})
		c.OnError(func(r *Response, _ error) {
			if r.Request.attempt == 2 {
				close(copyAnalyzed)
			}
		})
		c.OnResponse(func(r *Response) {
			if retried.CompareAndSwap(false, true) {
				if err := r.Request.Retry(); err != nil {
					t.Errorf("Retry() error = %v", err)
					return
				}
				<-copyAnalyzed
				return
			}
			close(copyAnalyzed)
		})
		u := fmt.Sprintf("%s/?n=%d", srv.URL, i)
		wantFail := i%2 == 1
		if wantFail {
			u += "&fail=1"
		}
		err := c.Visit(u)
		var he *HTTPError
		switch {
		case wantFail && (!errors.As(err, &he) || he.StatusCode != http.StatusInternalServerError):
			t.Fatalf("round %d: Visit error = %v, want the retry's 500", i, err)
		case !wantFail && err != nil:
			t.Fatalf("round %d: Visit error = %v, want nil", i, err)
		}
	}
	if n := hits.Load(); n != 2*rounds {
		t.Errorf("server saw %d requests, want %d", n, 2*rounds)
	}
}
