package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
)

// Analyzer turns a response into items. Analyze must honour
// ctx and be safe for concurrent use.
type Analyzer[Resp, Item any] interface {
	Module
	Analyze(ctx context.Context, resp Resp) ([]Item, []error)
}

// ParseResponse is one parser of an Analyzer. body is a fresh reader over the
// response body, valid only until the parser returns.
type ParseResponse[Resp, Item any] func(ctx context.Context, resp Resp, body io.Reader) ([]Item, []error)

type analyzer[Resp, Item any] struct {
	base
	body    func(Resp) []byte
	parsers []ParseResponse[Resp, Item]
}

// NewAnalyzer returns an Analyzer that runs every parser, in order, on each
// response; each parser reads the bytes body(resp) returns through its own
// reader (a nil body func gives every parser an empty reader). The results of
// all parsers are concatenated. score nil means DefaultScore. No parsers, or a
// nil one, returns an error wrapping ErrInvalidModule. A panicking parser is
// recovered, reported as an error wrapping ErrPanic, and the next parser runs.
func NewAnalyzer[Resp, Item any](addr string, score CalculateScore, body func(Resp) []byte,
	parsers ...ParseResponse[Resp, Item]) (Analyzer[Resp, Item], error) {
	if len(parsers) == 0 {
		return nil, fmt.Errorf("%w: analyzer without parsers", ErrInvalidModule)
	}
	for i, p := range parsers {
		if p == nil {
			return nil, fmt.Errorf("%w: analyzer parser %d is nil", ErrInvalidModule, i)
		}
	}
	return &analyzer[Resp, Item]{
		base:    newBase(TypeAnalyzer, addr, score),
		body:    body,
		parsers: append([]ParseResponse[Resp, Item](nil), parsers...),
	}, nil
}

func (a *analyzer[Resp, Item]) Analyze(ctx context.Context, resp Resp) (items []Item, errs []error) {
	if !a.begin(ctx.Err() != nil) {
		return nil, []error{ctx.Err()}
	}
	defer func() {
		if v := recover(); v != nil { // from the body func
			errs = append(errs, panicError(v))
		}
		a.end(len(errs) == 0)
	}()
	var data []byte
	if a.body != nil {
		data = a.body(resp)
	}
	r := readers.Get().(*bytes.Reader)
	defer readers.Put(r)
	defer r.Reset(nil) // drop the body so the pool does not pin it
	for _, parse := range a.parsers {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		r.Reset(data)
		it, es := a.parse(ctx, parse, resp, r)
		items = concat(items, it)
		errs = concat(errs, es)
	}
	return items, errs
}

// readers recycles the body readers handed to parsers; a reader is valid only
// until its parser returns, so one per Analyze call suffices.
var readers = sync.Pool{New: func() any { return new(bytes.Reader) }}

// concat appends b to a, reusing b itself when a is empty so that the common
// single-parser case copies nothing.
func concat[T any](a, b []T) []T {
	if len(a) == 0 {
		return b
	}
	return append(a, b...)
}

func (a *analyzer[Resp, Item]) parse(ctx context.Context, parse ParseResponse[Resp, Item],
	resp Resp, body io.Reader) (items []Item, errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v))
		}
	}()
	return parse(ctx, resp, body)
}
