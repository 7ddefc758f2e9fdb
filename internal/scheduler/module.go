package scheduler

import (
	"strconv"
	"sync/atomic"
)

// Type is the kind of a module. The zero value is not a valid type.
type Type uint8

// Module types.
const (
	TypeDownloader Type = iota + 1
	TypeAnalyzer
	TypePipeline
)

// Letter returns the ID prefix of the type: 'D', 'A' or 'P' ('?' if unknown).
func (t Type) Letter() byte {
	switch t {
	case TypeDownloader:
		return 'D'
	case TypeAnalyzer:
		return 'A'
	case TypePipeline:
		return 'P'
	}
	return '?'
}

// String returns "downloader", "analyzer" or "pipeline".
func (t Type) String() string {
	switch t {
	case TypeDownloader:
		return "downloader"
	case TypeAnalyzer:
		return "analyzer"
	case TypePipeline:
		return "pipeline"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

func (t Type) valid() bool { return t >= TypeDownloader && t <= TypePipeline }

// Counts are a module's counters. Called counts every call; Accepted the calls
// whose context was still live, so the module's work ran; Completed the calls
// that ended without error; Handling the calls running now.
type Counts struct {
	Called    uint64 `json:"called"`
	Accepted  uint64 `json:"accepted"`
	Completed uint64 `json:"completed"`
	Handling  uint64 `json:"handling"`
}

// CalculateScore turns a module's counts into its score; the registrar hands
// out the module with the lowest score. It must be cheap and safe for
// concurrent use: it runs on every hand-out.
type CalculateScore func(Counts) uint64

// DefaultScore is Called + Handling: modules share calls evenly, and a module
// with calls still running counts as busier than one without.
func DefaultScore(c Counts) uint64 { return c.Called + c.Handling }

// Module is what every downloader, analyzer and pipeline is. Implementations
// must be safe for concurrent use.
type Module interface {
	// ID is "<letter><serial>|<addr>", e.g. "D1|127.0.0.1:8080" or "A3|".
	ID() string
	Addr() string
	Type() Type
	Score() uint64
	Counts() Counts
}

// serials hands out module serial numbers per type, from 1. They are
// process-wide so that IDs stay unique across schedulers sharing modules.
var serials [TypePipeline + 1]atomic.Uint64

// base implements Module; each concrete module embeds it.
type base struct {
	id    string
	addr  string
	typ   Type
	score CalculateScore

	called    atomic.Uint64
	accepted  atomic.Uint64
	completed atomic.Uint64
	handling  atomic.Int64
}

func newBase(t Type, addr string, score CalculateScore) base {
	if score == nil {
		score = DefaultScore
	}
	sn := serials[t].Add(1)
	id := string(t.Letter()) + strconv.FormatUint(sn, 10) + "|" + addr
	return base{id: id, addr: addr, typ: t, score: score}
}

func (b *base) ID() string   { return b.id }
func (b *base) Addr() string { return b.addr }
func (b *base) Type() Type   { return b.typ }

func (b *base) Counts() Counts {
	h := b.handling.Load()
	if h < 0 {
		h = 0
	}
	return Counts{
		Called:    b.called.Load(),
		Accepted:  b.accepted.Load(),
		Completed: b.completed.Load(),
		Handling:  uint64(h),
	}
}

func (b *base) Score() uint64 { return b.score(b.Counts()) }

// begin counts a call; it reports false (and counts nothing more) when ctx is
// already done. The caller must call end if begin returned true.
func (b *base) begin(done bool) bool {
	b.called.Add(1)
	if done {
		return false
	}
	b.accepted.Add(1)
	b.handling.Add(1)
	return true
}

func (b *base) end(ok bool) {
	if ok {
		b.completed.Add(1)
	}
	b.handling.Add(-1)
}
