package scheduler

import (
	"context"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestElasticWorkers: with WorkerIdle set, the download stage starts with
// one worker, grows to as many downloads as are submitted (up to
// DownloadWorkers) and shrinks back to one after WorkerIdle without work.
func TestElasticWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var inflight, most, downloaded atomic.Int64
		d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			downloaded.Add(1)
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
		args := testArgs()
		args.DownloadWorkers, args.AnalyzeWorkers, args.WorkerIdle = 12, 12, time.Second
		s := New[int, int, int]()
		ma := ModuleArgs[int, int, int]{Downloaders: []Downloader[int, int]{d}, Analyzers: []Analyzer[int, int]{a}, Pipelines: []Pipeline[int]{p}}
		if err := s.Init(args, ma); err != nil {
			t.Fatal(err)
		}
		// Goroutines are counted by their stacks, not runtime.NumGoroutine:
		// goroutines of other tests that are still exiting would skew it.
		base := schedulerGoroutines()
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// feeder, one download and one analyze worker, the pipeline workers
		// and the context watcher's registration.
		idle := schedulerGoroutines() - base
		if err := s.Submit(t.Context(), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := inflight.Load(); got != 10 {
			t.Errorf("downloads in flight after 10 submits = %d, want 10 (grown on demand)", got)
		}
		if err := s.Submit(t.Context(), 11, 12, 13, 14); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := inflight.Load(); got != 12 {
			t.Errorf("downloads in flight after 14 submits = %d, want DownloadWorkers 12", got)
		}
		close(release)
		synctest.Wait()
		<-time.After(2 * time.Second) // past WorkerIdle, in virtual time
		synctest.Wait()
		if got := schedulerGoroutines() - base; got != idle {
			t.Errorf("goroutines after WorkerIdle without work = %d, want %d as at start", got, idle)
		}
		if err := s.Submit(t.Context(), 20); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if got := most.Load(); got != 12 {
			t.Errorf("most downloads in flight = %d, want 12", got)
		}
		if got := downloaded.Load(); got != 15 {
			t.Errorf("requests downloaded = %d, want 15", got)
		}
	})
}

// TestGoexitInModule: a module that ends its goroutine with runtime.Goexit
// loses its job, not its worker: the pool is refilled and the rest of the
// work is done, even when more jobs exit than there are workers.
func TestGoexitInModule(t *testing.T) {
	for _, elastic := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var analyzed atomic.Int64
			d, err := NewDownloader[int, int]("", nil, func(_ context.Context, req int) (int, error) {
				if req%3 == 0 {
					runtime.Goexit()
				}
				return req, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			a, err := NewAnalyzer[int, int]("", nil, nil, func(_ context.Context, resp int, _ io.Reader) ([]int, []error) {
				if resp%3 == 1 {
					runtime.Goexit()
				}
				analyzed.Add(1)
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPipeline[int]("", nil, false, func(_ context.Context, it int) (int, error) { return it, nil })
			if err != nil {
				t.Fatal(err)
			}
			args := testArgs()
			args.DownloadWorkers, args.AnalyzeWorkers = 2, 2
			if elastic {
				args.WorkerIdle = time.Second
			}
			s := New[int, int, int]()
			ma := ModuleArgs[int, int, int]{Downloaders: []Downloader[int, int]{d}, Analyzers: []Analyzer[int, int]{a}, Pipelines: []Pipeline[int]{p}}
			if err := s.Init(args, ma); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			var reqs []int
			for i := range 30 {
				reqs = append(reqs, i)
			}
			if err := s.Submit(t.Context(), reqs...); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the run goes idle: every worker waits for work
			if got := analyzed.Load(); got != 10 {
				t.Errorf("responses analyzed to the end = %d, want 10", got)
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// schedulerGoroutines counts the goroutines running this package's code,
// other than tests themselves.
func schedulerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "magpie/internal/scheduler.") && !strings.Contains(g, "magpie/internal/scheduler.Test") {
			count++
		}
	}
	return count
}
