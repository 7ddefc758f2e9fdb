package scheduler

import (
	"fmt"
	"reflect"
	"time"
)

// PoolArgs sizes one buffer pool: buffers of BufferCap items, at most
// MaxBufferNumber of them. Both must be at least 1.
type PoolArgs struct {
	BufferCap       int `json:"buffer_cap"`
	MaxBufferNumber int `json:"max_buffer_number"`
}

// Check returns an error wrapping ErrInvalidArgs that names the bad field.
func (a PoolArgs) Check() error { return a.check("") }

func (a PoolArgs) check(prefix string) error {
	if a.BufferCap < 1 {
		return fmt.Errorf("%w: %sBufferCap is %d, want >= 1", ErrInvalidArgs, prefix, a.BufferCap)
	}
	if a.MaxBufferNumber < 1 {
		return fmt.Errorf("%w: %sMaxBufferNumber is %d, want >= 1", ErrInvalidArgs, prefix, a.MaxBufferNumber)
	}
	return nil
}

// DataArgs sizes the pools and worker stages.
type DataArgs struct {
	Request  PoolArgs `json:"request"`
	Response PoolArgs `json:"response"`
	Item     PoolArgs `json:"item"`
	// ErrorBuffer is the capacity of the Errors() channel; when it is full
	// further errors are dropped. 0 means every error is dropped.
	ErrorBuffer     int `json:"error_buffer"`
	DownloadWorkers int `json:"download_workers"`
	AnalyzeWorkers  int `json:"analyze_workers"`
	PipelineWorkers int `json:"pipeline_workers"`
	// WorkerIdle, when positive, makes the download and analyze stages
	// elastic: each starts with one worker, starts another (up to
	// DownloadWorkers or AnalyzeWorkers) whenever work waits that no idle
	// worker will take, and a worker beyond the first exits after
	// WorkerIdle without work. Zero keeps fixed pools of exactly that many.
	WorkerIdle time.Duration `json:"worker_idle"`
}

// Check returns an error wrapping ErrInvalidArgs that names the first bad
// field.
func (a DataArgs) Check() error {
	if err := a.Request.check("Request."); err != nil {
		return err
	}
	if err := a.Response.check("Response."); err != nil {
		return err
	}
	if err := a.Item.check("Item."); err != nil {
		return err
	}
	if a.WorkerIdle < 0 {
		return fmt.Errorf("%w: WorkerIdle is %v, want >= 0", ErrInvalidArgs, a.WorkerIdle)
	}
	if a.ErrorBuffer < 0 {
		return fmt.Errorf("%w: ErrorBuffer is %d, want >= 0", ErrInvalidArgs, a.ErrorBuffer)
	}
	for _, w := range []struct {
		name string
		n    int
	}{{"DownloadWorkers", a.DownloadWorkers}, {"AnalyzeWorkers", a.AnalyzeWorkers}, {"PipelineWorkers", a.PipelineWorkers}} {
		if w.n < 1 {
			return fmt.Errorf("%w: %s is %d, want >= 1", ErrInvalidArgs, w.name, w.n)
		}
	}
	return nil
}

// ModuleArgs lists the modules the scheduler registers at Init. Each list
// needs at least one module, none nil, each reporting the Type of its list.
type ModuleArgs[Req, Resp, Item any] struct {
	Downloaders []Downloader[Req, Resp]
	Analyzers   []Analyzer[Resp, Item]
	Pipelines   []Pipeline[Item]
}

// Check returns an error wrapping ErrInvalidArgs that names the bad field.
func (a ModuleArgs[Req, Resp, Item]) Check() error {
	if err := checkModules("Downloaders", TypeDownloader, a.Downloaders); err != nil {
		return err
	}
	if err := checkModules("Analyzers", TypeAnalyzer, a.Analyzers); err != nil {
		return err
	}
	return checkModules("Pipelines", TypePipeline, a.Pipelines)
}

func checkModules[M Module](field string, t Type, ms []M) error {
	if len(ms) == 0 {
		return fmt.Errorf("%w: %s is empty, want at least one module", ErrInvalidArgs, field)
	}
	for i, m := range ms {
		if isNil(m) {
			return fmt.Errorf("%w: %s[%d] is nil", ErrInvalidArgs, field, i)
		}
		if m.Type() != t {
			return fmt.Errorf("%w: %s[%d] (%s) has type %s, want %s", ErrInvalidArgs, field, i, m.ID(), m.Type(), t)
		}
	}
	return nil
}

// isNil reports whether m is a nil interface or an interface holding a nil
// pointer.
func isNil(m Module) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}
