package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Registrar keeps modules by type and hands out the one with the lowest score,
// ties broken round robin. The zero value is not usable; build it with
// NewRegistrar. It is safe for concurrent use.
type Registrar struct {
	mu     sync.RWMutex // guards byID and byType
	byID   map[string]Module
	byType [TypePipeline + 1][]Module // sorted by ID, so round robin is stable

	rr [TypePipeline + 1]atomic.Uint64 // round-robin start per type
}

// NewRegistrar returns an empty registrar.
func NewRegistrar() *Registrar {
	return &Registrar{byID: make(map[string]Module)}
}

// Register adds m. It reports false with an error wrapping ErrInvalidModule for
// a nil module or unknown type, and wrapping ErrDuplicateModule when the ID is
// taken.
func (r *Registrar) Register(m Module) (bool, error) {
	if isNil(m) {
		return false, fmt.Errorf("%w: nil module", ErrInvalidModule)
	}
	t := m.Type()
	if !t.valid() {
		return false, fmt.Errorf("%w: module %q has unknown type %s", ErrInvalidModule, m.ID(), t)
	}
	id := m.ID()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; ok {
		return false, fmt.Errorf("%w: %q", ErrDuplicateModule, id)
	}
	r.byID[id] = m
	list := append(slices.Clone(r.byType[t]), m) // readers may hold the old slice
	slices.SortFunc(list, func(a, b Module) int { return cmp.Compare(a.ID(), b.ID()) })
	r.byType[t] = list
	return true, nil
}

// Get returns the module of type t with the lowest score; among equal scores
// successive calls take turns. It returns an error wrapping ErrNotFound when
// no module of t is registered.
func (r *Registrar) Get(t Type) (Module, error) {
	if !t.valid() {
		return nil, fmt.Errorf("%w: unknown module type %s", ErrNotFound, t)
	}
	r.mu.RLock()
	list := r.byType[t]
	r.mu.RUnlock()
	n := len(list)
	switch n {
	case 0:
		return nil, fmt.Errorf("%w: no %s registered", ErrNotFound, t)
	case 1:
		return list[0], nil
	}
	start := int(r.rr[t].Add(1) % uint64(n))
	best := list[start]
	bestScore := best.Score()
	for i := 1; i < n; i++ {
		m := list[(start+i)%n]
		if s := m.Score(); s < bestScore {
			best, bestScore = m, s
		}
	}
	return best, nil
}
