package scheduler

import (
	"context"
	"io"
	"testing"
)

// BenchmarkSchedulerNoop pushes batches of requests through no-op modules:
// every request is downloaded, analysed into one item, and the item sent
// through a pipeline. It measures the engine's own overhead per request.
func BenchmarkSchedulerNoop(b *testing.B) {
	const batch = 1000
	d, _ := NewDownloader[int, int]("", nil, func(_ context.Context, req int) (int, error) { return req, nil })
	a, _ := NewAnalyzer[int, int]("", nil, nil, func(_ context.Context, resp int, _ io.Reader) ([]int, []error) {
		return []int{resp}, nil
	})
	done := make(chan struct{}, batch)
	p, _ := NewPipeline[int]("", nil, false, func(_ context.Context, item int) (int, error) {
		done <- struct{}{}
		return item, nil
	})
	pa := PoolArgs{BufferCap: 256, MaxBufferNumber: 4}
	da := DataArgs{Request: pa, Response: pa, Item: pa, ErrorBuffer: 16, DownloadWorkers: 2, AnalyzeWorkers: 2, PipelineWorkers: 2}
	s := New[int, int, int]()
	if err := s.Init(da, ModuleArgs[int, int, int]{
		Downloaders: []Downloader[int, int]{d}, Analyzers: []Analyzer[int, int]{a}, Pipelines: []Pipeline[int]{p},
	}); err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	reqs := make([]int, batch)
	for b.Loop() {
		if err := s.Submit(ctx, reqs...); err != nil {
			b.Fatal(err)
		}
		for range batch {
			<-done
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/req")
	if err := s.Stop(); err != nil {
		b.Fatal(err)
	}
}
