package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestDataArgsCheck(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*DataArgs)
		field string // "" means valid
	}{
		{"valid", func(*DataArgs) {}, ""},
		{"request cap", func(a *DataArgs) { a.Request.BufferCap = 0 }, "Request.BufferCap"},
		{"response max", func(a *DataArgs) { a.Response.MaxBufferNumber = 0 }, "Response.MaxBufferNumber"},
		{"item cap", func(a *DataArgs) { a.Item.BufferCap = -1 }, "Item.BufferCap"},
		{"error buffer", func(a *DataArgs) { a.ErrorBuffer = -1 }, "ErrorBuffer"},
		{"download workers", func(a *DataArgs) { a.DownloadWorkers = 0 }, "DownloadWorkers"},
		{"analyze workers", func(a *DataArgs) { a.AnalyzeWorkers = 0 }, "AnalyzeWorkers"},
		{"pipeline workers", func(a *DataArgs) { a.PipelineWorkers = 0 }, "PipelineWorkers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testArgs()
			tt.edit(&a)
			checkArgsErr(t, a.Check(), tt.field)
		})
	}
}

func TestModuleArgsCheck(t *testing.T) {
	full := newTreeCrawl(1).modules(t, 1)
	var nilDownloader *downloader[int, int]
	tests := []struct {
		name  string
		edit  func(*ModuleArgs[int, int, int])
		field string
	}{
		{"valid", func(*ModuleArgs[int, int, int]) {}, ""},
		{"no downloaders", func(m *ModuleArgs[int, int, int]) { m.Downloaders = nil }, "Downloaders"},
		{"nil downloader", func(m *ModuleArgs[int, int, int]) { m.Downloaders = []Downloader[int, int]{nil} }, "Downloaders[0]"},
		{"typed nil downloader", func(m *ModuleArgs[int, int, int]) {
			m.Downloaders = append(m.Downloaders, nilDownloader)
		}, "Downloaders[1]"},
		{"wrong type", func(m *ModuleArgs[int, int, int]) {
			m.Downloaders = append(m.Downloaders, &mistyped{base: newBase(TypeAnalyzer, "", nil)})
		}, "Downloaders[1]"},
		{"no analyzers", func(m *ModuleArgs[int, int, int]) { m.Analyzers = nil }, "Analyzers"},
		{"no pipelines", func(m *ModuleArgs[int, int, int]) { m.Pipelines = nil }, "Pipelines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := full
			m.Downloaders = append([]Downloader[int, int](nil), full.Downloaders...)
			tt.edit(&m)
			checkArgsErr(t, m.Check(), tt.field)
			if tt.field == "" {
				return
			}
			s := New[int, int, int]()
			if err := s.Init(testArgs(), m); !errors.Is(err, ErrInvalidArgs) {
				t.Errorf("Init() error = %v, want %v", err, ErrInvalidArgs)
			}
			if s.Status() != StatusUninitialized {
				t.Errorf("Status() after failed Init = %s, want %s", s.Status(), StatusUninitialized)
			}
		})
	}
}

func TestInitDuplicateModule(t *testing.T) {
	m := newTreeCrawl(1).modules(t, 1)
	m.Downloaders = append(m.Downloaders, m.Downloaders[0])
	s := New[int, int, int]()
	err := s.Init(testArgs(), m)
	if !errors.Is(err, ErrDuplicateModule) || !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Init() with a module twice error = %v, want %v and %v", err, ErrDuplicateModule, ErrInvalidArgs)
	}
}

func checkArgsErr(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("Check() error = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), field) {
		t.Errorf("Check() error = %v, want %v naming %s", err, ErrInvalidArgs, field)
	}
}

// mistyped is a Downloader that claims to be an analyzer.
type mistyped struct{ base }

func (m *mistyped) Download(context.Context, int) (int, error) { return 0, nil }
