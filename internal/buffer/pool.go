package buffer

import (
	"context"
	"fmt"
	"runtime"
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
// buffers live in a channel; a caller takes one buffer, tries it, and returns
// it to the back of the channel, so each buffer is touched by one goroutine at
// a time and data spreads evenly across buffers.
//
// The pool as a whole is NOT FIFO: items come out of whichever buffer a getter
// happens to take, so two items put in order may be got in the other order.
//
// Put blocks while every buffer is full and Get while every buffer is empty;
// blocked callers sleep on a signal (they do not spin) and give up on
// ctx.Done(). When puts keep finding every buffer full the pool adds a buffer,
// up to MaxBufferNumber; when gets keep finding buffers empty it retires empty
// buffers, down to one.
//
// A Pool must be built with NewPool and closed with Close by its owner; it is
// safe for concurrent use.
type Pool[T any] struct {
	bufCap int
	maxBuf int

	// bufs holds every live buffer not currently in a caller's hands. Its
	// capacity is maxBuf, so returning a buffer never blocks.
	bufs   chan *Buffer[T]
	number atomic.Int64 // live buffers, in bufs or in hand
	total  atomic.Int64 // items held
	closed atomic.Bool
	done   chan struct{} // closed by Close, wakes every blocked caller

	// mu serialises changes of number with Close, so the max is never
	// exceeded and nothing is added to or retired from a closed pool.
	mu sync.Mutex

	putFails atomic.Int64 // puts that found a full buffer since the last growth check
	getFails atomic.Int64 // gets that found an empty buffer since the last shrink check

	// Waiters register before re-checking total; the other side changes total
	// before looking at the waiter count, so one of the two always sees the
	// other and a wake-up cannot be lost. A woken waiter that succeeds passes
	// the signal on while the condition still holds.
	putWaiters atomic.Int64
	getWaiters atomic.Int64
	notFull    chan struct{} // capacity 1
	notEmpty   chan struct{} // capacity 1

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
		bufs:     make(chan *Buffer[T], maxBufferNumber),
		done:     make(chan struct{}),
		notFull:  make(chan struct{}, 1),
		notEmpty: make(chan struct{}, 1),
	}
	p.bufs <- &Buffer[T]{items: make([]T, bufferCap)}
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

// Grown and Shrunk return how many buffers have been added and retired since
// the pool was built.
func (p *Pool[T]) Grown() uint64  { return p.grown.Load() }
func (p *Pool[T]) Shrunk() uint64 { return p.shrunk.Load() }

// Put adds v, blocking while every buffer is full. It returns ctx.Err() if ctx
// is done first and ErrClosed once the pool is closed.
func (p *Pool[T]) Put(ctx context.Context, v T) error {
	for {
		ok, err := p.tryPut(ctx, v, true)
		if ok || err != nil {
			return err
		}
		// Every buffer was full: sleep until a get makes room.
		p.putWaiters.Add(1)
		if p.total.Load() < p.number.Load()*int64(p.bufCap) {
			// Room appeared, or a getter is between taking an item and
			// counting it; retry rather than sleep.
			p.putWaiters.Add(-1)
			runtime.Gosched()
			continue
		}
		select {
		case <-p.notFull:
		case <-ctx.Done():
			p.putWaiters.Add(-1)
			return ctx.Err()
		case <-p.done:
			p.putWaiters.Add(-1)
			return ErrClosed
		}
		p.putWaiters.Add(-1)
	}
}

// TryPut adds v if some buffer has room and reports whether it did; it never
// blocks on a full pool. It returns ErrClosed once the pool is closed.
func (p *Pool[T]) TryPut(v T) (bool, error) {
	return p.tryPut(context.Background(), v, false)
}

// Get removes and returns an item, blocking while every buffer is empty. It
// returns ctx.Err() if ctx is done first and ErrClosed once the pool is closed.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	for {
		v, ok, err := p.tryGet(ctx, true)
		if ok || err != nil {
			return v, err
		}
		p.getWaiters.Add(1)
		if p.total.Load() > 0 {
			p.getWaiters.Add(-1)
			runtime.Gosched()
			continue
		}
		select {
		case <-p.notEmpty:
		case <-ctx.Done():
			p.getWaiters.Add(-1)
			return v, ctx.Err()
		case <-p.done:
			p.getWaiters.Add(-1)
			return v, ErrClosed
		}
		p.getWaiters.Add(-1)
	}
}

// TryGet removes and returns an item if one is available, reporting whether it
// did; it never blocks on an empty pool. It returns ErrClosed once the pool is
// closed.
func (p *Pool[T]) TryGet() (T, bool, error) {
	return p.tryGet(context.Background(), false)
}

// Close closes the pool and every buffer, wakes every blocked Put and Get (they
// return ErrClosed) and returns the items still inside, so shutdown loses
// nothing silently. Only the first call returns items; later calls return nil.
func (p *Pool[T]) Close() []T {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return nil
	}
	p.closed.Store(true)
	close(p.done)
	n := int(p.number.Load()) // stable from now on: grow and shrink refuse a closed pool
	p.mu.Unlock()

	var out []T
	for range n {
		// A buffer in someone's hands comes back as soon as their
		// non-blocking try is over.
		b := <-p.bufs
		b.Close()
		out = append(out, b.Drain()...)
	}
	p.total.Add(-int64(len(out)))
	return out
}

// take removes a buffer from the channel, waiting (when wait is set) while
// every buffer is in other hands. It reports false when none is free and wait
// is unset.
func (p *Pool[T]) take(ctx context.Context, wait bool) (*Buffer[T], bool, error) {
	select {
	case b := <-p.bufs:
		return b, true, nil
	default:
	}
	if !wait {
		return nil, false, nil
	}
	select {
	case b := <-p.bufs:
		return b, true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-p.done:
		return nil, false, ErrClosed
	}
}

// tryPut offers v to up to BufferNumber buffers once each.
func (p *Pool[T]) tryPut(ctx context.Context, v T, wait bool) (bool, error) {
	if p.closed.Load() {
		return false, ErrClosed
	}
	n := p.number.Load()
	for range n {
		b, ok, err := p.take(ctx, wait)
		if err != nil || !ok {
			return false, err
		}
		if p.closed.Load() {
			p.bufs <- b
			return false, ErrClosed
		}
		// b is open: buffers are closed only by Close or shrink, and
		// neither returns them to the channel.
		ok, _ = b.Put(v)
		if !ok && p.putFails.Add(1) >= growFactor*n {
			p.putFails.Store(0)
			ok = p.grow(v)
		}
		p.bufs <- b
		if ok {
			p.total.Add(1)
			p.signalGetters()
			if p.putWaiters.Load() > 0 && p.total.Load() < p.number.Load()*int64(p.bufCap) {
				p.signal(p.notFull)
			}
			return true, nil
		}
	}
	return false, nil
}

// tryGet asks up to BufferNumber buffers once each for an item.
func (p *Pool[T]) tryGet(ctx context.Context, wait bool) (T, bool, error) {
	var zero T
	if p.closed.Load() {
		return zero, false, ErrClosed
	}
	n := p.number.Load()
	for range n {
		b, ok, err := p.take(ctx, wait)
		if err != nil || !ok {
			return zero, false, err
		}
		if p.closed.Load() {
			p.bufs <- b
			return zero, false, ErrClosed
		}
		v, ok, _ := b.Get()
		if ok {
			p.bufs <- b
			p.total.Add(-1)
			if p.putWaiters.Load() > 0 {
				p.signal(p.notFull)
			}
			if p.total.Load() > 0 {
				p.signalGetters()
			}
			return v, true, nil
		}
		if p.getFails.Add(1) >= shrinkFactor*n {
			p.getFails.Store(0)
			if p.shrink(b) {
				continue // b is retired, not returned
			}
		}
		p.bufs <- b
	}
	return zero, false, nil
}

// grow adds a buffer holding v, unless the pool is closed or at its max.
func (p *Pool[T]) grow(v T) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || p.number.Load() >= int64(p.maxBuf) {
		return false
	}
	b := &Buffer[T]{items: make([]T, p.bufCap)}
	b.items[0], b.n = v, 1
	p.number.Add(1)
	p.grown.Add(1)
	p.bufs <- b // cannot block: fewer than maxBuf buffers exist
	return true
}

// shrink retires b, which the caller holds and just found empty, unless the
// pool is closed or down to one buffer.
func (p *Pool[T]) shrink(b *Buffer[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || p.number.Load() <= 1 {
		return false
	}
	b.Close()
	p.number.Add(-1)
	p.shrunk.Add(1)
	return true
}

func (p *Pool[T]) signalGetters() {
	if p.getWaiters.Load() > 0 {
		p.signal(p.notEmpty)
	}
}

// signal leaves a token for one sleeper; a token already there is enough.
func (p *Pool[T]) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
