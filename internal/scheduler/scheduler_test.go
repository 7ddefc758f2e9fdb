package scheduler

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestSyntheticCrawl(t *testing.T) {
	tiny := PoolArgs{BufferCap: 1, MaxBufferNumber: 1}
	tests := []struct {
		name string
		da   DataArgs
	}{
		{"default pools", testArgs()},
		// Every hand-off is full almost always: Submit waits for room and
		// the stages must not deadlock against each other.
		{"tiny pools, one worker each", DataArgs{Request: tiny, Response: tiny, Item: tiny, ErrorBuffer: 1,
			DownloadWorkers: 1, AnalyzeWorkers: 1, PipelineWorkers: 1}},
	}
	const n = 10000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTreeCrawl(n)
			s := New[int, int, int]()
			stop := startCrawl(t, s, tt.da, tc.modules(t, 3), seq(0, n)...)
			tc.wait(n)
			for _, err := range stop() {
				t.Errorf("unexpected error from Errors(): %v", err)
			}
			if len(tc.downloads) != n {
				t.Errorf("downloaded %d distinct pages, want %d", len(tc.downloads), n)
			}
			for page, c := range tc.downloads {
				if c != 1 {
					t.Errorf("page %d downloaded %d times, want 1", page, c)
				}
			}
			if tc.items != n {
				t.Errorf("pipeline saw %d items, want %d", tc.items, n)
			}
			if left := s.Leftovers(); len(left.Requests)+len(left.Responses)+len(left.Items) != 0 {
				t.Errorf("Leftovers() = %d requests, %d responses, %d items; want nothing left", len(left.Requests), len(left.Responses), len(left.Items))
			}
		})
	}
}

// startCrawl inits and starts s over tc with the given downloaders, submits
// first, and returns a function that stops it and returns what Errors()
// delivered.
func startCrawl(t *testing.T, s *Scheduler[int, int, int], da DataArgs, ma ModuleArgs[int, int, int], first ...int) func() []error {
	t.Helper()
	if err := s.Init(da, ma); err != nil {
		t.Fatalf("Init() error = %v", err)
	}
	errs := drainErrors(s.Errors())
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	if err := s.Submit(t.Context(), first...); err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	return func() []error {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop() error = %v", err)
		}
		return errs()
	}
}

func TestLoadBalancing(t *testing.T) {
	const n = 3000
	tests := []struct {
		name   string
		scores []CalculateScore
		check  func(t *testing.T, calls []uint64)
	}{
		{
			name:   "equal scores share evenly",
			scores: []CalculateScore{nil, nil, nil},
			check: func(t *testing.T, calls []uint64) {
				for i, c := range calls {
					if c < n/3*9/10 || c > n/3*11/10 {
						t.Errorf("downloader %d called %d times, want %d ±10%%", i, c, n/3)
					}
				}
			},
		},
		{
			name: "lower score gets more",
			scores: []CalculateScore{
				func(c Counts) uint64 { return c.Called / 2 }, // looks half as busy
				nil, nil,
			},
			check: func(t *testing.T, calls []uint64) {
				if calls[0] <= calls[1] || calls[0] <= calls[2] {
					t.Errorf("calls = %v, want the first (lower-scored) downloader to get the most", calls)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTreeCrawl(n)
			ma := tc.modules(t, 0)
			for _, sc := range tt.scores {
				d, err := NewDownloader[int, int]("", sc, tc.download)
				if err != nil {
					t.Fatal(err)
				}
				ma.Downloaders = append(ma.Downloaders, d)
			}
			s := New[int, int, int]()
			stop := startCrawl(t, s, testArgs(), ma, seq(0, n)...)
			tc.wait(n)
			stop()
			var calls []uint64
			var sum uint64
			for _, d := range ma.Downloaders {
				calls = append(calls, d.Counts().Called)
				sum += d.Counts().Called
			}
			if sum != n {
				t.Fatalf("downloads = %d, want %d", sum, n)
			}
			tt.check(t, calls)
		})
	}
}

// blockingCrawl is a crawl whose downloads never finish on their own: they
// wait for the context, as a well-behaved module does.
func blockingModules(t *testing.T, started chan<- struct{}) ModuleArgs[int, int, int] {
	t.Helper()
	return blockingModulesCounting(t, started, new(atomic.Int64))
}

// blockingModulesCounting is blockingModules counting in cancelled the
// downloads the context cut short.
func blockingModulesCounting(t *testing.T, started chan<- struct{}, cancelled *atomic.Int64) ModuleArgs[int, int, int] {
	t.Helper()
	tc := newTreeCrawl(1 << 30)
	ma := tc.modules(t, 0)
	d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		cancelled.Add(1)
		return 0, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	ma.Downloaders = []Downloader[int, int]{d}
	return ma
}

func TestStopDuringBusyCrawl(t *testing.T) {
	before := runtime.NumGoroutine()
	started := make(chan struct{}, 1)
	s := New[int, int, int]()
	da := testArgs()
	var cancelled atomic.Int64
	stop := startCrawl(t, s, da, blockingModulesCounting(t, started, &cancelled), 1, 2, 3)
	const queued = 50
	if err := s.Submit(t.Context(), seq(100, queued)...); err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	<-started
	t0 := time.Now()
	errs := stop()
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Stop() took %v, want < 1s", d)
	}
	if len(errs) != 0 {
		t.Errorf("Errors() = %v, want no errors for cancelled work", errs)
	}
	if s.Status() != StatusStopped {
		t.Errorf("Status() = %s, want %s", s.Status(), StatusStopped)
	}
	left := int64(len(s.Leftovers().Requests))
	total := int64(3 + queued)
	if got := left + cancelled.Load(); got != total {
		t.Errorf("left %d + cancelled %d = %d requests, want %d (none dropped silently)", left, cancelled.Load(), got, total)
	}
	if want := total - int64(da.DownloadWorkers); left < want {
		t.Errorf("Leftovers() has %d requests, want >= %d (all but the ones downloading)", left, want)
	}
	if err := s.Submit(t.Context(), 1); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Submit() after Stop error = %v, want %v", err, ErrNotStarted)
	}
	checkGoroutines(t, before)
}

// checkGoroutines waits (briefly, in the test only) for the goroutine count
// to fall back to before: goroutines that exited may take a moment to be
// reaped by the runtime.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// TestNoGoroutineOutlivesRun runs whole crawls inside a synctest bubble:
// synctest.Test fails if any goroutine the scheduler started is still
// blocked when the test function returns.
func TestNoGoroutineOutlivesRun(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Scheduler[int, int, int])
	}{
		{"wait then stop", func(t *testing.T, s *Scheduler[int, int, int]) {
			tc := newTreeCrawl(500)
			stop := startCrawl(t, s, testArgs(), tc.modules(t, 2), seq(0, 500)...)
			tc.wait(500)
			stop()
		}},
		{"stop while busy", func(t *testing.T, s *Scheduler[int, int, int]) {
			started := make(chan struct{}, 1)
			stop := startCrawl(t, s, testArgs(), blockingModules(t, started), seq(0, 50)...)
			<-started
			stop()
		}},
		{"context cancelled", func(t *testing.T, s *Scheduler[int, int, int]) {
			started := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(t.Context())
			if err := s.Init(testArgs(), blockingModules(t, started)); err != nil {
				t.Fatal(err)
			}
			errs := drainErrors(s.Errors())
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Submit(ctx, seq(0, 50)...); err != nil {
				t.Fatal(err)
			}
			<-started
			cancel()
			errs() // the error channel closes when the run has stopped
			if s.Status() != StatusStopped {
				t.Errorf("Status() after cancel = %s, want %s", s.Status(), StatusStopped)
			}
			if err := s.Stop(); !errors.Is(err, ErrIllegalTransition) {
				t.Errorf("Stop() after cancel error = %v, want %v", err, ErrIllegalTransition)
			}
			// Init waits for the context watcher, so nothing outlives it.
			if err := s.Init(testArgs(), blockingModules(t, started)); err != nil {
				t.Errorf("Init() after cancel error = %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.run(t, New[int, int, int]())
			})
		})
	}
}

func TestPanickingModules(t *testing.T) {
	synctest.Test(t, testPanickingModules)
}

func testPanickingModules(t *testing.T) {
	const n = 300
	tc := newTreeCrawl(n)
	ma := tc.modules(t, 1)
	d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		if req%10 == 5 {
			panic("downloader boom")
		}
		return tc.download(ctx, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	ma.Downloaders = []Downloader[int, int]{d}
	ma.Pipelines = append(ma.Pipelines, &rawPipeline{base: newBase(TypePipeline, "raw", nil)})
	s := New[int, int, int]()
	stop := startCrawl(t, s, testArgs(), ma, seq(0, n)...)
	synctest.Wait() // the crawl is idle
	errs := stop()
	stages := map[string]int{}
	for _, err := range errs {
		var se *StageError
		if !errors.As(err, &se) {
			t.Fatalf("error %v is not a *StageError", err)
		}
		if errors.Is(err, ErrPanic) {
			stages[se.Stage]++
			if se.Stage == StageDownload && se.ModuleID != d.ID() {
				t.Errorf("download panic ModuleID = %q, want %q", se.ModuleID, d.ID())
			}
		}
	}
	if stages[StageDownload] == 0 || stages[StagePipeline] == 0 {
		t.Errorf("panics by stage = %v, want download > 0, pipeline > 0", stages)
	}
	if len(tc.downloads) == 0 {
		t.Errorf("no page downloaded after panics")
	}
}

// rawPipeline implements Pipeline directly (not via NewPipeline) and panics,
// to check that the scheduler itself recovers module panics.
type rawPipeline struct{ base }

func (p *rawPipeline) Send(ctx context.Context, item int) []error { panic("raw pipeline boom") }
func (p *rawPipeline) FailFast() bool                             { return false }
func (p *rawPipeline) SetFailFast(bool)                           {}

// TestUnreadErrorsDoNotBlock fails every download and never reads Errors().
func TestUnreadErrorsDoNotBlock(t *testing.T) {
	synctest.Test(t, testUnreadErrorsDoNotBlock)
}

func testUnreadErrorsDoNotBlock(t *testing.T) {
	tc := newTreeCrawl(1)
	ma := tc.modules(t, 0)
	boom := errors.New("boom")
	var failed atomic.Int64
	d, _ := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		failed.Add(1)
		return 0, boom
	})
	ma.Downloaders = []Downloader[int, int]{d}
	da := testArgs()
	da.ErrorBuffer = 2
	s := New[int, int, int]()
	if err := s.Init(da, ma); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(t.Context(), seq(0, 100)...); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // every download has failed: nothing blocked on Errors()
	if got := failed.Load(); got != 100 {
		t.Errorf("downloads failed = %d, want 100", got)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	var got []error
	for err := range s.Errors() {
		got = append(got, err)
	}
	if len(got) != 2 || !errors.Is(got[0], boom) {
		t.Errorf("Errors() = %v, want 2 errors wrapping %v", got, boom)
	}
}

func TestSubmit(t *testing.T) {
	tc := newTreeCrawl(0)
	s := New[int, int, int]()
	if err := s.Submit(t.Context(), 1); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Submit() before Init error = %v, want %v", err, ErrNotStarted)
	}
	da := testArgs()
	da.Request = PoolArgs{BufferCap: 1, MaxBufferNumber: 1}
	stop := startCrawl(t, s, da, tc.modules(t, 1))
	defer stop()
	if err := s.Submit(t.Context(), seq(0, 1000)...); err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	tc.wait(1000)
	if len(tc.downloads) != 1000 || tc.items != 1000 {
		t.Errorf("downloads = %d, items = %d, want 1000 each", len(tc.downloads), tc.items)
	}
	// Submit does not dedupe: resubmitting is downloaded again.
	if err := s.Submit(t.Context(), 0); err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	tc.wait(1001)
	if tc.downloads[0] != 2 {
		t.Errorf("page 0 downloaded %d times, want 2", tc.downloads[0])
	}
}
