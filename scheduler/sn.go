package scheduler

import (
	"fmt"
	"sync"
)

// SNGenerator hands out serial numbers start, start+1, ..., max, then wraps
// back to start and counts a cycle. Build it with NewSNGenerator; it is safe
// for concurrent use.
type SNGenerator struct {
	start, max uint64

	mu     sync.Mutex // guards next and cycles
	next   uint64
	cycles uint64
}

// NewSNGenerator returns a generator over [start, max]. max below start
// returns an error wrapping ErrInvalidSN.
func NewSNGenerator(start, max uint64) (*SNGenerator, error) {
	if max < start {
		return nil, fmt.Errorf("%w: max %d below start %d", ErrInvalidSN, max, start)
	}
	return &SNGenerator{start: start, max: max, next: start}, nil
}

// Start returns the first serial number of every cycle.
func (g *SNGenerator) Start() uint64 { return g.start }

// Max returns the last serial number before the generator wraps.
func (g *SNGenerator) Max() uint64 { return g.max }

// Next returns the serial number the next Get will return, without advancing.
func (g *SNGenerator) Next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

// CycleCount returns how many times the generator has wrapped.
func (g *SNGenerator) CycleCount() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cycles
}

// Get returns the current serial number and advances, wrapping to Start after
// Max.
func (g *SNGenerator) Get() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	sn := g.next
	if sn == g.max {
		g.next = g.start
		g.cycles++
	} else {
		g.next++
	}
	return sn
}
