package scheduler

import (
	"sync"
	"sync/atomic"
)

// pending counts the work a run still owes: requests queued or downloading,
// responses queued or being analysed, items queued or in pipelines. A request
// that becomes a response hands its unit on, so the hot path pays one atomic
// add per stage and the lock is taken only when the count crosses zero.
type pending struct {
	n atomic.Int64

	mu     sync.Mutex    // guards idle and closed
	idle   chan struct{} // closed while n == 0
	closed bool
}

func newPending() *pending {
	p := &pending{idle: make(chan struct{})}
	close(p.idle)
	p.closed = true
	return p
}

// add changes the count by d. Callers add new work before handing it on, so
// the count never reaches zero while work exists.
func (p *pending) add(d int64) {
	if d == 0 {
		return
	}
	v := p.n.Add(d)
	if (v == 0) != (v-d == 0) {
		p.sync()
	}
}

// sync makes the idle channel agree with the count. Every zero crossing calls
// it after changing n, so the last caller to take the lock sees the final
// count whatever the interleaving.
func (p *pending) sync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n.Load() == 0 {
		if !p.closed {
			close(p.idle)
			p.closed = true
		}
	} else if p.closed {
		p.idle = make(chan struct{})
		p.closed = false
	}
}

// wait returns a channel closed when the count is (or becomes) zero.
func (p *pending) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle
}

func (p *pending) load() int64 { return p.n.Load() }

// reset forgets all work; used once a stopped run has accounted for it.
func (p *pending) reset() {
	p.n.Store(0)
	p.sync()
}
