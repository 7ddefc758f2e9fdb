package scheduler

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
)

// testArgs returns small but valid data args.
func testArgs() DataArgs {
	p := PoolArgs{BufferCap: 16, MaxBufferNumber: 4}
	return DataArgs{Request: p, Response: p, Item: p, ErrorBuffer: 64, DownloadWorkers: 4, AnalyzeWorkers: 2, PipelineWorkers: 2}
}

// treeCrawl is a fake site of n pages, each submitted once (magpie's
// frontier dedupes before Submit; analyzers make no requests). It records
// how many times each page was downloaded.
type treeCrawl struct {
	n int

	mu        sync.Mutex // guards downloads, items
	downloads map[int]int
	items     int
	// more is signalled with each item the pipeline takes.
	more *sync.Cond
}

func newTreeCrawl(n int) *treeCrawl {
	tc := &treeCrawl{n: n, downloads: make(map[int]int)}
	tc.more = sync.NewCond(&tc.mu)
	return tc
}

// wait blocks until the pipeline has taken n items in all.
func (tc *treeCrawl) wait(n int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for tc.items < n {
		tc.more.Wait()
	}
}

func (tc *treeCrawl) download(ctx context.Context, req int) (int, error) {
	tc.mu.Lock()
	tc.downloads[req]++
	tc.mu.Unlock()
	return req, nil
}

func (tc *treeCrawl) parse(ctx context.Context, resp int, body io.Reader) ([]int, []error) {
	return []int{resp}, nil
}

func (tc *treeCrawl) pipe(ctx context.Context, item int) (int, error) {
	tc.mu.Lock()
	tc.items++
	tc.more.Broadcast()
	tc.mu.Unlock()
	return item, nil
}

// modules builds nd downloaders, one analyzer and one pipeline over tc.
func (tc *treeCrawl) modules(t testing.TB, nd int) ModuleArgs[int, int, int] {
	t.Helper()
	var ma ModuleArgs[int, int, int]
	for i := range nd {
		d, err := NewDownloader[int, int](fmt.Sprintf("127.0.0.1:%d", 8000+i), nil, tc.download)
		if err != nil {
			t.Fatalf("NewDownloader() error = %v", err)
		}
		ma.Downloaders = append(ma.Downloaders, d)
	}
	a, err := NewAnalyzer[int, int]("", nil, nil, tc.parse)
	if err != nil {
		t.Fatalf("NewAnalyzer() error = %v", err)
	}
	p, err := NewPipeline[int]("", nil, false, tc.pipe)
	if err != nil {
		t.Fatalf("NewPipeline() error = %v", err)
	}
	ma.Analyzers = []Analyzer[int, int]{a}
	ma.Pipelines = []Pipeline[int]{p}
	return ma
}

// drainErrors reads s.Errors() until it is closed, on a goroutine the test
// waits for; it returns a function that waits and returns what was read.
func drainErrors(ch <-chan error) func() []error {
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for err := range ch {
			errs = append(errs, err)
		}
	}()
	return func() []error { <-done; return errs }
}
