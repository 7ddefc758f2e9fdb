package scheduler

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestStopWaitsForRunStoppedByContext: when the run's context ends, the run
// stops on its own and a later Stop is refused; it must still not return
// while a module call (a user callback, which may ignore the context) is
// running, or its caller would tear down state the callback still uses.
func TestStopWaitsForRunStoppedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		release := make(chan struct{})
		var finished atomic.Bool
		d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) { return req, nil })
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewAnalyzer[int, int]("", nil, nil, func(ctx context.Context, resp int, _ io.Reader) ([]int, []error) {
			close(entered)
			<-release // ignores ctx, as a user callback may
			finished.Store(true)
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPipeline[int]("", nil, false, func(ctx context.Context, it int) (int, error) { return it, nil })
		if err != nil {
			t.Fatal(err)
		}
		s := New[int, int, int]()
		ma := ModuleArgs[int, int, int]{Downloaders: []Downloader[int, int]{d}, Analyzers: []Analyzer[int, int]{a}, Pipelines: []Pipeline[int]{p}}
		if err := s.Init(testArgs(), ma); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Submit(ctx, 1); err != nil {
			t.Fatal(err)
		}
		<-entered
		cancel()        // the run stops on its own, waiting for the analyzer
		synctest.Wait() // the context watcher is now stopping the run
		if st := s.Status(); st != StatusStopping {
			t.Fatalf("Status() after cancel = %v, want %v", st, StatusStopping)
		}

		stopped := make(chan bool, 1)
		go func() {
			_ = s.Stop() // refused (already stopping), but only after the workers exit
			stopped <- finished.Load()
		}()
		synctest.Wait() // everything blocked: Stop has returned only if it did not wait
		select {
		case <-stopped:
			t.Fatal("Stop returned while the analyzer was still running")
		default:
		}
		close(release)
		if fin := <-stopped; !fin {
			t.Error("Stop returned before the analyzer finished")
		}
	})
}
