package scheduler

import (
	"context"
	"fmt"
)

// Downloader fetches one request. Download must honour ctx and be safe for
// concurrent use.
type Downloader[Req, Resp any] interface {
	Module
	Download(ctx context.Context, req Req) (Resp, error)
}

type downloader[Req, Resp any] struct {
	base
	download func(ctx context.Context, req Req) (Resp, error)
}

// NewDownloader returns a Downloader that calls download. addr is free-form
// (the remote it talks to, or empty); score nil means DefaultScore. A nil
// download returns an error wrapping ErrInvalidModule. A panic in download is
// recovered and returned as an error wrapping ErrPanic.
func NewDownloader[Req, Resp any](addr string, score CalculateScore,
	download func(ctx context.Context, req Req) (Resp, error)) (Downloader[Req, Resp], error) {
	if download == nil {
		return nil, fmt.Errorf("%w: nil download function", ErrInvalidModule)
	}
	return &downloader[Req, Resp]{base: newBase(TypeDownloader, addr, score), download: download}, nil
}

func (d *downloader[Req, Resp]) Download(ctx context.Context, req Req) (resp Resp, err error) {
	if !d.begin(ctx.Err() != nil) {
		return resp, &notBegunError{ctx.Err()}
	}
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
		d.end(err == nil)
	}()
	return d.download(ctx, req)
}
