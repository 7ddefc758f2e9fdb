package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Pipeline processes one item through a chain of processors. Send must honour
// ctx and be safe for concurrent use.
type Pipeline[Item any] interface {
	Module
	Send(ctx context.Context, item Item) []error
	// FailFast reports whether Send stops at the first processor error.
	FailFast() bool
	SetFailFast(bool)
}

// ProcessItem is one step of a Pipeline; its result is the next step's input.
type ProcessItem[Item any] func(ctx context.Context, item Item) (Item, error)

type pipeline[Item any] struct {
	base
	failFast   atomic.Bool
	processors []ProcessItem[Item]
}

// NewPipeline returns a Pipeline that runs processors in order, each on the
// previous one's result. With failFast, Send stops at the first error;
// without, a failing processor's input is passed on unchanged. score nil means
// DefaultScore. No processors, or a nil one, returns an error wrapping
// ErrInvalidModule. A panicking processor counts as a failing one, with an
// error wrapping ErrPanic.
func NewPipeline[Item any](addr string, score CalculateScore, failFast bool,
	processors ...ProcessItem[Item]) (Pipeline[Item], error) {
	if len(processors) == 0 {
		return nil, fmt.Errorf("%w: pipeline without processors", ErrInvalidModule)
	}
	for i, p := range processors {
		if p == nil {
			return nil, fmt.Errorf("%w: pipeline processor %d is nil", ErrInvalidModule, i)
		}
	}
	p := &pipeline[Item]{
		base:       newBase(TypePipeline, addr, score),
		processors: append([]ProcessItem[Item](nil), processors...),
	}
	p.failFast.Store(failFast)
	return p, nil
}

func (p *pipeline[Item]) FailFast() bool     { return p.failFast.Load() }
func (p *pipeline[Item]) SetFailFast(v bool) { p.failFast.Store(v) }

func (p *pipeline[Item]) Send(ctx context.Context, item Item) (errs []error) {
	if !p.begin(ctx.Err() != nil) {
		return []error{ctx.Err()}
	}
	defer func() { p.end(len(errs) == 0) }()
	failFast := p.failFast.Load()
	for _, process := range p.processors {
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
		out, err := p.process(ctx, process, item)
		if err != nil {
			errs = append(errs, err)
			if failFast {
				return errs
			}
			continue
		}
		item = out
	}
	return errs
}

func (p *pipeline[Item]) process(ctx context.Context, process ProcessItem[Item], item Item) (out Item, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return process(ctx, item)
}
