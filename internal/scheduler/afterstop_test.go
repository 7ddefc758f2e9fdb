package scheduler

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
)

// afterStopScheduler starts a scheduler whose downloader calls inDownload
// for each request.
func afterStopScheduler(t *testing.T, ctx context.Context, inDownload func()) *Scheduler[int, int, int] {
	t.Helper()
	d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		inDownload()
		return req, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAnalyzer[int, int]("", nil, nil, func(context.Context, int, io.Reader) ([]int, []error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline[int]("", nil, false, func(_ context.Context, it int) (int, error) { return it, nil })
	if err != nil {
		t.Fatal(err)
	}
	s := New[int, int, int]()
	if s.AfterStop(func() {}) {
		t.Error("AfterStop() before Init = true, want false")
	}
	ma := ModuleArgs[int, int, int]{Downloaders: []Downloader[int, int]{d}, Analyzers: []Analyzer[int, int]{a}, Pipelines: []Pipeline[int]{p}}
	if err := s.Init(testArgs(), ma); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAfterStop: a function registered from inside a module runs once, after
// the workers have exited and before Stop returns, whether Stop or the run's
// context stops the run; none is kept once the run has stopped.
func TestAfterStop(t *testing.T) {
	for _, byContext := range []bool{false, true} {
		name := "Stop"
		if byContext {
			name = "context"
		}
		t.Run(name, func(t *testing.T) {
			var sp atomic.Pointer[Scheduler[int, int, int]]
			ready := make(chan struct{})
			var inFlight, ran atomic.Int32
			registered := make(chan bool, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s := afterStopScheduler(t, ctx, func() {
				inFlight.Add(1)
				defer inFlight.Add(-1)
				<-ready
				registered <- sp.Load().AfterStop(func() {
					if n := inFlight.Load(); n != 0 {
						t.Errorf("AfterStop function ran with %d downloads in flight", n)
					}
					ran.Add(1)
				})
			})
			sp.Store(s)
			close(ready)
			if ok := <-registered; !ok {
				t.Fatal("AfterStop() from a download = false, want true")
			}
			if byContext {
				cancel()
			}
			_ = s.Stop() // refused when the context stopped the run, after the run stopped
			if n := ran.Load(); n != 1 {
				t.Fatalf("AfterStop function ran %d times by the time Stop returned, want 1", n)
			}
			if s.AfterStop(func() { ran.Add(1) }) {
				t.Error("AfterStop() after the run stopped = true, want false")
			}
		})
	}
}
