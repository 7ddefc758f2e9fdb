package queuetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// StopsOnContext: 1,000 entries of a queue storage wait behind their host's
// 1 s Delay when the collector's StdlibContext (also the run's context, as
// the CLI passes it) is cancelled or reaches its deadline. The run ends
// within 2 s: the page in flight fails once with the context's error, never
// retried; no entry that was never sent reaches OnError; all 1,000 stay in
// the storage, unacknowledged, for a later run, and Stats.NotStarted counts
// those never sent.
func StopsOnContext(t *testing.T, open Stores) {
	const pages = 1000
	for _, deadline := range []bool{false, true} {
		t.Run(fmt.Sprintf("deadline=%v", deadline), func(t *testing.T) {
			s, visited := open(t)
			var ctx context.Context
			var cancel context.CancelFunc
			if deadline {
				ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
			} else {
				ctx, cancel = context.WithCancel(t.Context())
			}
			defer cancel()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 && !deadline {
					cancel()
				}
				<-r.Context().Done() // in flight until the client gives up
			}))
			defer srv.Close()
			c := magpie.NewCollector(magpie.StdlibContext(ctx), magpie.IgnoreRobotsTxt(),
				magpie.RetryPolicy(magpie.RetryOptions{MaxAttempts: 5, BaseDelay: time.Millisecond}))
			if visited != nil {
				if err := c.SetStorage(visited); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 1, Delay: time.Second}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var onErr []error
			c.OnError(func(_ *magpie.Response, err error) {
				mu.Lock()
				defer mu.Unlock()
				onErr = append(onErr, err)
			})
			q, err := queue.New(1, s)
			if err != nil {
				t.Fatal(err)
			}
			for i := range pages {
				if err := q.AddURL(fmt.Sprintf("%s/p/%d", srv.URL, i)); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- q.RunContext(ctx, c) }()
			var end time.Time
			select {
			case <-ctx.Done():
				end = time.Now()
			case <-time.After(time.Minute):
				t.Fatal("the context did not end")
			}
			select {
			case err := <-done:
				if took := time.Since(end); took > 2*time.Second {
					t.Errorf("RunContext returned %v after its context ended, want within 2s", took)
				}
				if !errors.Is(err, ctx.Err()) {
					t.Errorf("RunContext() = %v, want an error wrapping %v", err, ctx.Err())
				}
			case <-time.After(time.Minute):
				t.Fatal("RunContext did not return within a minute of its context")
			}
			n := hits.Load()
			if n > 1 {
				t.Errorf("%d pages requested, want at most 1 (the Delay is 1s)", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if int64(len(onErr)) != n {
				t.Errorf("OnError called %d times (%v), want %d: the page in flight only", len(onErr), onErr, n)
			}
			for _, err := range onErr {
				if _, retried := errors.AsType[*magpie.RetryError](err); retried || !errors.Is(err, ctx.Err()) {
					t.Errorf("OnError(%v), want the context's error, not retried", err)
				}
			}
			st := c.Stats()
			if st.Retries != 0 || int64(st.Requests) != n || st.NotStarted != uint64(pages-n) {
				t.Errorf("Stats retries %d, requests %d, not started %d; want 0, %d, %d", st.Retries, st.Requests, st.NotStarted, n, pages-n)
			}
			if l, err := s.Len(context.Background()); err != nil || l.Total() != pages {
				t.Errorf("Len() = %+v, %v; want all %d entries kept in the storage", l, err, pages)
			}
		})
	}
}
