package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
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
			if err := s.Wait(t.Context()); err != nil {
				t.Fatalf("Wait() error = %v", err)
			}
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
			sum := s.Summary()
			if sum.Requests.Downloaded != n || sum.ItemsDone != n || sum.Left != (LeftCounts{}) {
				t.Errorf("Summary() = %+v, want %d downloaded and items done, nothing left", sum, n)
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
			if err := s.Wait(t.Context()); err != nil {
				t.Fatalf("Wait() error = %v", err)
			}
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
	tc := newTreeCrawl(1 << 30)
	ma := tc.modules(t, 0)
	d, err := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
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
	stop := startCrawl(t, s, da, blockingModules(t, started), 1, 2, 3)
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
	sum := s.Summary()
	left := s.Leftovers()
	total := uint64(3 + queued)
	if got := sum.Left.Requests + sum.Requests.Cancelled; got != total {
		t.Errorf("left %d + cancelled %d = %d requests, want %d (none dropped silently)", sum.Left.Requests, sum.Requests.Cancelled, got, total)
	}
	if want := total - uint64(da.DownloadWorkers); sum.Left.Requests < want {
		t.Errorf("Summary().Left.Requests = %d, want >= %d (all but the ones downloading)", sum.Left.Requests, want)
	}
	if uint64(len(left.Requests)) != sum.Left.Requests {
		t.Errorf("Leftovers() has %d requests, Summary says %d", len(left.Requests), sum.Left.Requests)
	}
	if err := s.Wait(t.Context()); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait() after busy Stop error = %v, want %v", err, ErrStopped)
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
			if err := s.Wait(t.Context()); err != nil {
				t.Errorf("Wait() error = %v", err)
			}
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
	if err := s.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
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
	if sum := s.Summary(); sum.Panics == 0 || sum.Requests.Downloaded == 0 {
		t.Errorf("Summary() panics = %d, downloaded = %d; want both > 0", sum.Panics, sum.Requests.Downloaded)
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
	tc := newTreeCrawl(1)
	ma := tc.modules(t, 0)
	boom := errors.New("boom")
	d, _ := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) { return 0, boom })
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
	if err := s.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	sum := s.Summary()
	if sum.ErrorsSent != 2 || sum.ErrorsDropped != 98 || sum.Requests.Failed != 100 {
		t.Errorf("Summary() errors sent %d dropped %d failed %d, want 2, 98, 100", sum.ErrorsSent, sum.ErrorsDropped, sum.Requests.Failed)
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

func TestSubmitAndWait(t *testing.T) {
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
	if err := s.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	if len(tc.downloads) != 1000 || tc.items != 1000 {
		t.Errorf("downloads = %d, items = %d, want 1000 each", len(tc.downloads), tc.items)
	}
	// Submit does not dedupe: resubmitting is downloaded again.
	if err := s.Submit(t.Context(), 0); err != nil {
		t.Fatalf("Submit() error = %v", err)
	}
	if err := s.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	if tc.downloads[0] != 2 {
		t.Errorf("page 0 downloaded %d times, want 2", tc.downloads[0])
	}
}

func TestWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 1)
		s := New[int, int, int]()
		stop := startCrawl(t, s, testArgs(), blockingModules(t, started), 1)
		defer stop()
		<-started
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait() on a busy crawl error = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}

func TestSummaryJSON(t *testing.T) {
	tc := newTreeCrawl(10)
	s := New[int, int, int]()
	stop := startCrawl(t, s, testArgs(), tc.modules(t, 2), seq(0, 10)...)
	if err := s.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop()
	sum := s.Summary()
	data, err := json.Marshal(sum)
	if err != nil {
		t.Fatalf("json.Marshal(Summary()) error = %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back["status"] != "stopped" {
		t.Errorf("JSON status = %v, want %q", back["status"], "stopped")
	}
	if mods, _ := back["modules"].([]any); len(mods) != 4 {
		t.Errorf("JSON modules = %v, want 4", back["modules"])
	}
	for _, want := range []string{"status: stopped", "request pool:", "module D", "downloaded=10"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("Summary().String() lacks %q:\n%s", want, sum)
		}
	}
}
