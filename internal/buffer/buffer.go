package buffer

import (
	"fmt"
	"sync"
)

// Buffer is a fixed-capacity FIFO that never blocks: a full buffer refuses a
// Put and an empty one refuses a Get, each reported as a boolean. After Close,
// Put and Get return ErrClosed; closing twice is harmless.
//
// A Buffer must be built with NewBuffer; it is safe for concurrent use.
type Buffer[T any] struct {
	mu     sync.Mutex // guards every field below
	items  []T        // ring storage, len == capacity
	head   int        // index of the oldest item
	n      int        // number of items held
	closed bool
}

// NewBuffer returns an empty buffer holding at most capacity items. A capacity
// below one returns an error wrapping ErrInvalidSize.
func NewBuffer[T any](capacity int) (*Buffer[T], error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: buffer capacity %d, want >= 1", ErrInvalidSize, capacity)
	}
	return &Buffer[T]{items: make([]T, capacity)}, nil
}

// Put appends v. It reports false without error when the buffer is full, and
// returns ErrClosed once the buffer is closed.
func (b *Buffer[T]) Put(v T) (bool, error) {
	b.mu.Lock()
	ok, err := b.put(v)
	b.mu.Unlock()
	return ok, err
}

// put is Put for a caller that holds b exclusively (b.mu, or the pool's mu
// while b is out of the pool's ring).
func (b *Buffer[T]) put(v T) (bool, error) {
	if b.closed {
		return false, ErrClosed
	}
	if b.n == len(b.items) {
		return false, nil
	}
	i := b.head + b.n
	if i >= len(b.items) {
		i -= len(b.items)
	}
	b.items[i] = v
	b.n++
	return true, nil
}

// Get removes and returns the oldest item. It reports false without error when
// the buffer is empty, and returns ErrClosed once the buffer is closed.
func (b *Buffer[T]) Get() (T, bool, error) {
	b.mu.Lock()
	v, ok, err := b.get()
	b.mu.Unlock()
	return v, ok, err
}

// get is Get for a caller that holds b exclusively.
func (b *Buffer[T]) get() (T, bool, error) {
	var zero T
	if b.closed {
		return zero, false, ErrClosed
	}
	if b.n == 0 {
		return zero, false, nil
	}
	v := b.items[b.head]
	b.items[b.head] = zero // let the garbage collector have it
	b.head++
	if b.head == len(b.items) {
		b.head = 0
	}
	b.n--
	return v, true, nil
}

// Close closes the buffer and reports whether this call closed it. Items still
// inside stay there for Drain.
func (b *Buffer[T]) Close() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.closed = true
	return true
}

// Drain removes and returns every item still held, oldest first, whether or not
// the buffer is closed. It is how a closed buffer hands back its data.
func (b *Buffer[T]) Drain() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return nil
	}
	out := make([]T, 0, b.n)
	var zero T
	for b.n > 0 {
		out = append(out, b.items[b.head])
		b.items[b.head] = zero
		b.head++
		if b.head == len(b.items) {
			b.head = 0
		}
		b.n--
	}
	return out
}

// Closed reports whether Close has been called.
func (b *Buffer[T]) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Cap returns the fixed capacity.
func (b *Buffer[T]) Cap() int { return len(b.items) }

// Len returns the number of items held.
func (b *Buffer[T]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}
