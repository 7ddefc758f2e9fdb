package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"io"
)

// Analyzer turns a response into new requests and items. Analyze must honour
// ctx and be safe for concurrent use.
type Analyzer[Req, Resp, Item any] interface {
	Module
	Analyze(ctx context.Context, resp Resp) ([]Req, []Item, []error)
}

// ParseResponse is one parser of an Analyzer. body is a fresh reader over the
// response body, valid only until the parser returns.
type ParseResponse[Req, Resp, Item any] func(ctx context.Context, resp Resp, body io.Reader) ([]Req, []Item, []error)

type analyzer[Req, Resp, Item any] struct {
	base
	body    func(Resp) []byte
	parsers []ParseResponse[Req, Resp, Item]
}

// NewAnalyzer returns an Analyzer that runs every parser, in order, on each
// response; each parser reads the bytes body(resp) returns through its own
// reader (a nil body func gives every parser an empty reader). The results of
// all parsers are concatenated. score nil means DefaultScore. No parsers, or a
// nil one, returns an error wrapping ErrInvalidModule. A panicking parser is
// recovered, reported as an error wrapping ErrPanic, and the next parser runs.
func NewAnalyzer[Req, Resp, Item any](addr string, score CalculateScore, body func(Resp) []byte,
	parsers ...ParseResponse[Req, Resp, Item]) (Analyzer[Req, Resp, Item], error) {
	if len(parsers) == 0 {
		return nil, fmt.Errorf("%w: analyzer without parsers", ErrInvalidModule)
	}
	for i, p := range parsers {
		if p == nil {
			return nil, fmt.Errorf("%w: analyzer parser %d is nil", ErrInvalidModule, i)
		}
	}
	return &analyzer[Req, Resp, Item]{
		base:    newBase(TypeAnalyzer, addr, score),
		body:    body,
		parsers: append([]ParseResponse[Req, Resp, Item](nil), parsers...),
	}, nil
}

func (a *analyzer[Req, Resp, Item]) Analyze(ctx context.Context, resp Resp) (reqs []Req, items []Item, errs []error) {
	if !a.begin(ctx.Err() != nil) {
		return nil, nil, []error{ctx.Err()}
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
	r := bytes.NewReader(data)
	for _, parse := range a.parsers {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		r.Reset(data)
		rq, it, es := a.parse(ctx, parse, resp, r)
		reqs = append(reqs, rq...)
		items = append(items, it...)
		errs = append(errs, es...)
	}
	return reqs, items, errs
}

func (a *analyzer[Req, Resp, Item]) parse(ctx context.Context, parse ParseResponse[Req, Resp, Item],
	resp Resp, body io.Reader) (reqs []Req, items []Item, errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v))
		}
	}()
	return parse(ctx, resp, body)
}
