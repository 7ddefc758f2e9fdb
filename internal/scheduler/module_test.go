package scheduler

import (
	"context"
	"errors"
	"io"
	"testing"
)

func TestConstructorsRejectNil(t *testing.T) {
	if _, err := NewDownloader[int, int]("", nil, nil); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("NewDownloader(nil) error = %v, want %v", err, ErrInvalidModule)
	}
	if _, err := NewAnalyzer[int, int]("", nil, nil); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("NewAnalyzer(no parsers) error = %v, want %v", err, ErrInvalidModule)
	}
	if _, err := NewAnalyzer[int, int]("", nil, nil, nil); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("NewAnalyzer(nil parser) error = %v, want %v", err, ErrInvalidModule)
	}
	if _, err := NewPipeline[int]("", nil, false); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("NewPipeline(no processors) error = %v, want %v", err, ErrInvalidModule)
	}
}

func TestDownloaderCounts(t *testing.T) {
	boom := errors.New("boom")
	d, _ := NewDownloader[int, int]("", nil, func(ctx context.Context, req int) (int, error) {
		switch req {
		case 1:
			return 0, boom
		case 2:
			panic("two")
		}
		return req * 10, nil
	})
	ctx := t.Context()
	if got, err := d.Download(ctx, 3); got != 30 || err != nil {
		t.Errorf("Download(3) = %d, %v, want 30, nil", got, err)
	}
	if _, err := d.Download(ctx, 1); !errors.Is(err, boom) {
		t.Errorf("Download(1) error = %v, want %v", err, boom)
	}
	if _, err := d.Download(ctx, 2); !errors.Is(err, ErrPanic) {
		t.Errorf("Download(2) error = %v, want %v", err, ErrPanic)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Download(cancelled, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Download(cancelled) error = %v, want %v", err, context.Canceled)
	}
	want := Counts{Called: 4, Accepted: 3, Completed: 1, Handling: 0}
	if got := d.Counts(); got != want {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
	if got := d.Score(); got != DefaultScore(want) {
		t.Errorf("Score() = %d, want %d", got, DefaultScore(want))
	}
}

func TestAnalyzerFreshReaders(t *testing.T) {
	var bodies []string
	read := func(ctx context.Context, resp string, body io.Reader) ([]int, []error) {
		b, err := io.ReadAll(body)
		bodies = append(bodies, string(b))
		return []int{len(b)}, []error{err}
	}
	boom := func(ctx context.Context, resp string, body io.Reader) ([]int, []error) { panic("parser") }
	a, err := NewAnalyzer[string, int]("", nil, func(s string) []byte { return []byte(s) }, read, boom, read)
	if err != nil {
		t.Fatal(err)
	}
	items, errs := a.Analyze(t.Context(), "hello")
	if len(bodies) != 2 || bodies[0] != "hello" || bodies[1] != "hello" {
		t.Errorf("parsers read %q, want \"hello\" twice", bodies)
	}
	if len(items) != 2 || items[0] != 5 || items[1] != 5 {
		t.Errorf("Analyze() items = %v, want [5 5]", items)
	}
	var panics int
	for _, err := range errs {
		if errors.Is(err, ErrPanic) {
			panics++
		} else if err != nil {
			t.Errorf("Analyze() error = %v", err)
		}
	}
	if panics != 1 {
		t.Errorf("Analyze() reported %d panics, want 1", panics)
	}
	// A nil body func gives an empty reader.
	a2, _ := NewAnalyzer[string, int]("", nil, nil, read)
	bodies = nil
	a2.Analyze(t.Context(), "ignored")
	if len(bodies) != 1 || bodies[0] != "" {
		t.Errorf("nil body func: parser read %q, want empty", bodies)
	}
}

func TestPipelineFailFast(t *testing.T) {
	boom := errors.New("boom")
	var ran []string
	step := func(name string, fail bool) ProcessItem[int] {
		return func(ctx context.Context, item int) (int, error) {
			ran = append(ran, name)
			if fail {
				return 0, boom
			}
			return item + 1, nil
		}
	}
	tests := []struct {
		failFast bool
		wantRan  int
	}{
		{true, 2},
		{false, 3},
	}
	for _, tt := range tests {
		ran = nil
		p, err := NewPipeline("", nil, tt.failFast, step("a", false), step("b", true), step("c", false))
		if err != nil {
			t.Fatal(err)
		}
		if p.FailFast() != tt.failFast {
			t.Errorf("FailFast() = %v, want %v", p.FailFast(), tt.failFast)
		}
		errs := p.Send(t.Context(), 0)
		if len(errs) != 1 || !errors.Is(errs[0], boom) || len(ran) != tt.wantRan {
			t.Errorf("failFast=%v: Send() errors = %v, ran %v; want [%v], %d steps", tt.failFast, errs, ran, boom, tt.wantRan)
		}
		p.SetFailFast(!tt.failFast)
		if p.FailFast() == tt.failFast {
			t.Errorf("SetFailFast(%v) did not take", !tt.failFast)
		}
	}
}
