package scheduler

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func newTestDownloader(t *testing.T, addr string, score CalculateScore) Downloader[int, int] {
	t.Helper()
	d, err := NewDownloader[int, int](addr, score, func(ctx context.Context, req int) (int, error) { return req, nil })
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRegistrar(t *testing.T) {
	r := NewRegistrar()
	if _, err := r.Get(TypeDownloader); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get() on empty error = %v, want %v", err, ErrNotFound)
	}
	if ok, err := r.Register(nil); ok || !errors.Is(err, ErrInvalidModule) {
		t.Errorf("Register(nil) = %v, %v, want false, %v", ok, err, ErrInvalidModule)
	}
	ds := []Downloader[int, int]{newTestDownloader(t, "a:1", nil), newTestDownloader(t, "b:1", nil), newTestDownloader(t, "c:1", nil)}
	for _, d := range ds {
		if ok, err := r.Register(d); !ok || err != nil {
			t.Fatalf("Register(%s) = %v, %v, want true, nil", d.ID(), ok, err)
		}
	}
	if ok, err := r.Register(ds[0]); ok || !errors.Is(err, ErrDuplicateModule) {
		t.Errorf("Register(dup) = %v, %v, want false, %v", ok, err, ErrDuplicateModule)
	}
	// Equal scores (all untouched): round robin visits each in turn.
	seen := map[string]int{}
	for range 30 {
		m, err := r.Get(TypeDownloader)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.ID()]++
	}
	for _, d := range ds {
		if seen[d.ID()] != 10 {
			t.Errorf("Get() returned %s %d times of 30, want 10", d.ID(), seen[d.ID()])
		}
	}
	// A busier module is skipped.
	_, _ = ds[0].Download(context.Background(), 1)
	_, _ = ds[1].Download(context.Background(), 1)
	for range 5 {
		if m, _ := r.Get(TypeDownloader); m.ID() != ds[2].ID() {
			t.Errorf("Get() = %s, want lowest-scored %s", m.ID(), ds[2].ID())
		}
	}
}

func TestModuleIDs(t *testing.T) {
	d := newTestDownloader(t, "127.0.0.1:8080", nil)
	a, _ := NewAnalyzer[int, int]("", nil, nil, func(context.Context, int, io.Reader) ([]int, []error) { return nil, nil })
	p, _ := NewPipeline[int]("", nil, false, func(_ context.Context, i int) (int, error) { return i, nil })
	for _, tt := range []struct {
		m      Module
		prefix string
		suffix string
		typ    Type
	}{
		{d, "D", "|127.0.0.1:8080", TypeDownloader},
		{a, "A", "|", TypeAnalyzer},
		{p, "P", "|", TypePipeline},
	} {
		id := tt.m.ID()
		serial := strings.TrimSuffix(strings.TrimPrefix(id, tt.prefix), tt.suffix)
		if _, err := strconv.ParseUint(serial, 10, 64); err != nil || !strings.HasPrefix(id, tt.prefix) || !strings.HasSuffix(id, tt.suffix) {
			t.Errorf("ID() = %q, want %s<serial>%s", id, tt.prefix, tt.suffix)
		}
		if tt.m.Type() != tt.typ || tt.m.Type().Letter() != tt.prefix[0] {
			t.Errorf("%s Type() = %s (%c), want %s", id, tt.m.Type(), tt.m.Type().Letter(), tt.typ)
		}
	}
}
