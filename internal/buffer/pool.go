package buffer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Growth and shrink thresholds, as multiples of the current buffer number: a
// pool grows after about growFactor×n puts found a full buffer and shrinks after
// about shrinkFactor×n gets found an empty one. Shrinking is slower than growing
// so a pool under bursty load does not oscillate.
const (
	growFactor   = 5
	shrinkFactor = 10
)

// Pool is a blocking, growable pool of Buffers: the double-layer design. The
// live buffers wait in a rotation queue; a caller takes the buffer at the
// front, tries it, and returns it to the back, so each buffer is touched by
// one caller at a time and data spreads evenly across buffers.
//
// The pool as a whole is NOT FIFO: items come out of whichever buffer a getter
// happens to take, so two items put in order may be got in the other order.
//
// Put blocks while every buffer is full and Get while every buffer is empty;
// blocked callers sleep on a signal (they do not spin) and give up on
// ctx.Done(). When puts keep finding every buffer full the pool adds a buffer,
// up to MaxBufferNumber (a Put never sleeps below the max: it grows the pool
// first); when gets keep finding buffers empty it retires empty buffers, down
// to one.
//
// A Pool must be built with NewPool and closed with Close by its owner; it is
// safe for concurrent use.
type Pool[T any] struct {
	bufCap int
	maxBuf int

	// mu guards ring, head, n, putFails, getFails, putWaiters, getWaiters
	// and every change of the atomics below (they are atomic only so the
	// read-only accessors need not take mu). One short critical section per
	// Put or Get is the whole cost of the outer layer; see the package doc
	// for why this replaced a channel of buffers.
	mu sync.Mutex

	// ring is the rotation queue of live buffers: n of them starting at
	// head, wrapping around; len(ring) == maxBuf.
	ring []*Buffer[T]
	head int
	n    int

	putFails int // puts that found a full buffer since the last growth
	getFails int // gets that found an empty buffer since the last shrink

	// Waiters register under mu before they sleep, and every change that
	// can let them proceed is made under mu and signals when a waiter is
	// registered, so a wake-up cannot be lost. A token channel holds at
	// most one token; a woken caller that succeeds passes the signal on
	// while the condition still holds and others still wait.
	putWaiters int
	getWaiters int
	notFull    chan struct{} // capacity 1
	notEmpty   chan struct{} // capacity 1
	done       chan struct{} // closed by Close, wakes every blocked caller

	number atomic.Int64 // live buffers
	total  atomic.Int64 // items held
	closed atomic.Bool
	grown  atomic.Uint64
	shrunk atomic.Uint64
}

// NewPool returns a pool of one buffer of bufferCap items that may grow to
// maxBufferNumber buffers. Either size below one returns an error wrapping
// ErrInvalidSize.
func NewPool[T any](bufferCap, maxBufferNumber int) (*Pool[T], error) {
	if bufferCap < 1 {
		return nil, fmt.Errorf("%w: pool buffer capacity %d, want >= 1", ErrInvalidSize, bufferCap)
	}
	if maxBufferNumber < 1 {
		return nil, fmt.Errorf("%w: pool max buffer number %d, want >= 1", ErrInvalidSize, maxBufferNumber)
	}
	p := &Pool[T]{
		bufCap:   bufferCap,
		maxBuf:   maxBufferNumber,
		ring:     make([]*Buffer[T], maxBufferNumber),
		done:     make(chan struct{}),
		notFull:  make(chan struct{}, 1),
		notEmpty: make(chan struct{}, 1),
	}
	p.pushBack(&Buffer[T]{items: make([]T, bufferCap)})
	p.number.Store(1)
	return p, nil
}

// BufferCap returns the capacity of each buffer.
func (p *Pool[T]) BufferCap() int { return p.bufCap }

// MaxBufferNumber returns the most buffers the pool may hold.
func (p *Pool[T]) MaxBufferNumber() int { return p.maxBuf }

// BufferNumber returns the number of live buffers.
func (p *Pool[T]) BufferNumber() int { return int(p.number.Load()) }

// Total returns the number of items held.
func (p *Pool[T]) Total() int { return int(p.total.Load()) }

// Closed reports whether Close has been called.
func (p *Pool[T]) Closed() bool { return p.closed.Load() }

// Grown returns how many buffers the pool has added since it was built.
func (p *Pool[T]) Grown() uint64 { return p.grown.Load() }

// Shrunk returns how many buffers the pool has retired since it was built.
func (p *Pool[T]) Shrunk() uint64 { return p.shrunk.Load() }

// Put adds v, blocking while every buffer is full. It returns ctx.Err() if ctx
// is done first and ErrClosed once the pool is closed.
func (p *Pool[T]) Put(ctx context.Context, v T) error {
	p.mu.Lock()
	for {
		if p.closed.Load() {
			p.mu.Unlock()
			return ErrClosed
		}
		// Below the max a full pool grows rather than blocks. Under mu a
		// repeated scan would only count more failures towards the same
		// growth, so grow at once.
		if p.tryPutLocked(v) || (p.n < p.maxBuf && p.grow(v)) {
			p.putDone()
			p.mu.Unlock()
			return nil
		}
		p.putWaiters++
		p.mu.Unlock()
		err := p.sleep(ctx, p.notFull)
		p.mu.Lock()
		p.putWaiters--
		if err != nil {
			// Leaving by ctx or Close never consumes a token (select
			// took the other case), so the remaining sleepers lose
			// no wake-up.
			p.mu.Unlock()
			return err
		}
	}
}

// TryPut adds v if some buffer has room and reports whether it did; it never
// blocks on a full pool. It returns ErrClosed once the pool is closed.
func (p *Pool[T]) TryPut(v T) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return false, ErrClosed
	}
	if !p.tryPutLocked(v) {
		return false, nil
	}
	p.putDone()
	return true, nil
}

// Get removes and returns an item, blocking while every buffer is empty. It
// returns ctx.Err() if ctx is done first and ErrClosed once the pool is closed.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	var zero T
	p.mu.Lock()
	for {
		if p.closed.Load() {
			p.mu.Unlock()
			return zero, ErrClosed
		}
		if v, ok := p.tryGetLocked(); ok {
			p.getDone()
			p.mu.Unlock()
			return v, nil
		}
		p.getWaiters++
		p.mu.Unlock()
		err := p.sleep(ctx, p.notEmpty)
		p.mu.Lock()
		p.getWaiters--
		if err != nil {
			p.mu.Unlock()
			return zero, err
		}
	}
}

// TryGet removes and returns an item if one is available, reporting whether it
// did; it never blocks on an empty pool. It returns ErrClosed once the pool is
// closed.
func (p *Pool[T]) TryGet() (T, bool, error) {
	var zero T
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return zero, false, ErrClosed
	}
	v, ok := p.tryGetLocked()
	if !ok {
		return zero, false, nil
	}
	p.getDone()
	return v, true, nil
}

// Close closes the pool and every buffer, wakes every blocked Put and Get (they
// return ErrClosed) and returns the items still inside, so shutdown loses
// nothing silently. Only the first call returns items; later calls return nil.
func (p *Pool[T]) Close() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil
	}
	p.closed.Store(true)
	close(p.done)
	var out []T
	// Every live buffer is in the ring: callers hold one only inside mu.
	for range p.n {
		b := p.popFront()
		b.Close()
		out = append(out, b.Drain()...)
	}
	p.total.Add(-int64(len(out)))
	return out
}

// sleep waits for a token on ch, ctx.Done() or Close. The caller must not
// hold mu.
func (p *Pool[T]) sleep(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrClosed
	}
}

// tryPutLocked offers v to up to n buffers once each, front to back, returning
// each to the back. A full buffer counts towards growth; at the threshold the
// pool grows with v as the new buffer's first item. The caller holds mu.
func (p *Pool[T]) tryPutLocked(v T) bool {
	for range p.n {
		b := p.popFront()
		// Every buffer in the ring is open: only Close and shrink close
		// buffers, and neither returns them to the ring.
		ok, _ := b.put(v)
		p.pushBack(b)
		if ok {
			return true
		}
		p.putFails++
		if p.putFails >= growFactor*p.n {
			if p.grow(v) {
				return true
			}
		}
	}
	return false
}

// tryGetLocked asks up to n buffers once each for an item, front to back,
// returning each to the back. An empty buffer counts towards shrinking; at the
// threshold it is retired instead of returned. The caller holds mu.
func (p *Pool[T]) tryGetLocked() (T, bool) {
	var zero T
	for range p.n {
		b := p.popFront()
		v, ok, _ := b.get()
		if ok {
			p.pushBack(b)
			return v, true
		}
		p.getFails++
		// b is out of the ring: the pool has p.n+1 buffers.
		if p.getFails >= shrinkFactor*(p.n+1) && p.shrink(b) {
			continue // b is retired, not returned
		}
		p.pushBack(b)
	}
	return zero, false
}

// putDone records a successful put and wakes a getter if one sleeps. The
// caller holds mu.
func (p *Pool[T]) putDone() {
	p.total.Add(1)
	if p.getWaiters > 0 {
		signal(p.notEmpty)
	}
	// A putter woken by a get passes the wake-up on while room remains.
	if p.putWaiters > 0 && p.total.Load() < int64(p.n*p.bufCap) {
		signal(p.notFull)
	}
}

// getDone records a successful get and wakes a putter if one sleeps. The
// caller holds mu.
func (p *Pool[T]) getDone() {
	p.total.Add(-1)
	if p.putWaiters > 0 {
		signal(p.notFull)
	}
	if p.getWaiters > 0 && p.total.Load() > 0 {
		signal(p.notEmpty)
	}
}

// grow adds a buffer holding v, unless the pool is closed or at its max. The
// caller holds mu.
func (p *Pool[T]) grow(v T) bool {
	if p.closed.Load() || p.n >= p.maxBuf {
		return false
	}
	p.putFails = 0
	b := &Buffer[T]{items: make([]T, p.bufCap)}
	b.items[0], b.n = v, 1
	p.pushBack(b)
	p.number.Store(int64(p.n))
	p.grown.Add(1)
	return true
}

// shrink retires b, which the caller took from the ring and just found empty,
// unless the pool would be left with no buffer. The caller holds mu.
func (p *Pool[T]) shrink(b *Buffer[T]) bool {
	p.getFails = 0
	// b is out of the ring, so p.n counts the others.
	if p.n < 1 {
		return false
	}
	b.Close()
	p.number.Store(int64(p.n))
	p.shrunk.Add(1)
	return true
}

// popFront takes the buffer at the front of the ring. The caller holds mu and
// knows n > 0.
func (p *Pool[T]) popFront() *Buffer[T] {
	b := p.ring[p.head]
	p.ring[p.head] = nil
	p.head++
	if p.head == len(p.ring) {
		p.head = 0
	}
	p.n--
	return b
}

// pushBack returns b to the back of the ring. The caller holds mu and knows
// n < maxBuf.
func (p *Pool[T]) pushBack(b *Buffer[T]) {
	i := p.head + p.n
	if i >= len(p.ring) {
		i -= len(p.ring)
	}
	p.ring[i] = b
	p.n++
}

// signal leaves a token for one sleeper; a token already there is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
