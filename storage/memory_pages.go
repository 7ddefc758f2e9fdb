package storage

import (
	"context"
	"iter"
	"time"
)

// GetPages implements PageStore.
func (s *InMemoryStorage) GetPages(ctx context.Context, ids ...uint64) ([]PageState, []bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	states, found := make([]PageState, len(ids)), make([]bool, len(ids))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	for i, id := range ids {
		enc, ok := s.pages[id]
		if !ok {
			continue
		}
		if err := states[i].UnmarshalBinary([]byte(enc)); err != nil {
			return nil, nil, err
		}
		found[i] = true
	}
	return states, found, nil
}

// PutPages implements PageStore. The states are kept encoded, as the
// durable stores keep them, so that a million pages cost about a hundred
// megabytes rather than the size of a million structs and their strings.
func (s *InMemoryStorage) PutPages(ctx context.Context, pages ...Page) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	enc := make([]string, len(pages))
	for i, p := range pages {
		b, _ := p.State.MarshalBinary() // never fails: the error is encoding.BinaryMarshaler's
		enc[i] = string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.initLocked(); err != nil {
		return err
	}
	if s.pages == nil {
		s.pages = make(map[uint64]string)
	}
	for i, p := range pages {
		s.pages[p.ID] = enc[i]
	}
	return nil
}

// DuePages implements PageStore. The due pages are collected under the
// lock when the sequence starts, so the loop may use the store.
func (s *InMemoryStorage) DuePages(ctx context.Context, before time.Time) iter.Seq2[Page, error] {
	return func(yield func(Page, error) bool) {
		due, err := s.collectDue(ctx, before)
		if err != nil {
			yield(Page{}, err)
			return
		}
		for _, p := range due {
			if !yield(p, nil) {
				return
			}
		}
	}
}

func (s *InMemoryStorage) collectDue(ctx context.Context, before time.Time) ([]Page, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var due []Page
	for id, enc := range s.pages {
		var st PageState
		if err := st.UnmarshalBinary([]byte(enc)); err != nil {
			return nil, err
		}
		if !st.Due.After(before) {
			due = append(due, Page{ID: id, State: st})
		}
	}
	return due, nil
}
