package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

var _ storage.PageStore = (*Store)(nil)

// pagesKey is the hash holding the states of the pages whose IDs fall in
// id's visited shard: P:p:N, field the ID's eight bytes, value the encoded
// storage.PageState. Sharded as the visited set is, so a cluster spreads
// them over its slots.
func (s *Store) pagesKey(id uint64) string {
	return s.prefix + ":p:" + strconv.FormatUint(id%s.shards, 10)
}

func pageField(id uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	return string(b[:])
}

// GetPages implements storage.PageStore with one HGET per ID, pipelined in
// one round trip.
func (s *Store) GetPages(ctx context.Context, ids ...uint64) ([]storage.PageState, []bool, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	states, found := make([]storage.PageState, len(ids)), make([]bool, len(ids))
	if len(ids) == 0 {
		return states, found, nil
	}
	p := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.HGet(ctx, s.pagesKey(id), pageField(id))
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, s.wrap("get pages", err)
	}
	for i, c := range cmds {
		b, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, nil, s.wrap("get pages", err)
		}
		if err := states[i].UnmarshalBinary(b); err != nil {
			return nil, nil, fmt.Errorf("redisstore: page %d: %w", ids[i], err)
		}
		found[i] = true
	}
	return states, found, nil
}

// PutPages implements storage.PageStore with one HSET per page, pipelined
// in one round trip; on error some may be stored.
func (s *Store) PutPages(ctx context.Context, pages ...storage.Page) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(pages) == 0 {
		return nil
	}
	p := s.rdb.Pipeline()
	for _, pg := range pages {
		b, _ := pg.State.MarshalBinary() // never fails: the error is encoding.BinaryMarshaler's
		p.HSet(ctx, s.pagesKey(pg.ID), pageField(pg.ID), b)
	}
	_, err := p.Exec(ctx)
	return s.wrap("put pages", err)
}

// duePageScan is the COUNT hint of one HSCAN of DuePages, and
// duePagePipeline how many shards' HSCANs go in one round trip.
const (
	duePageScan     = 512
	duePagePipeline = 256
)

// DuePages implements storage.PageStore by scanning every shard's hash
// with HSCAN, many shards per round trip, and keeping the pages that are
// due. HSCAN may return a field twice when the hash is resized during the
// scan; such repeats are dropped.
func (s *Store) DuePages(ctx context.Context, before time.Time) iter.Seq2[storage.Page, error] {
	return func(yield func(storage.Page, error) bool) {
		cutoff := before.UnixMilli()
		for first := uint64(0); first < s.shards; first += duePagePipeline {
			shards := make(map[string]uint64) // key -> cursor, for shards not done
			for shard := first; shard < min(first+duePagePipeline, s.shards); shard++ {
				shards[s.prefix+":p:"+strconv.FormatUint(shard, 10)] = 0
			}
			seen := map[uint64]bool{}
			for len(shards) > 0 {
				pages, err := s.scanShards(ctx, shards, cutoff, seen)
				if err != nil {
					yield(storage.Page{}, err)
					return
				}
				for _, p := range pages {
					if !yield(p, nil) {
						return
					}
				}
			}
		}
	}
}

// scanShards runs one HSCAN on each shard key, in one pipeline, and returns
// the due pages it found; it updates the cursors, dropping finished shards.
func (s *Store) scanShards(ctx context.Context, shards map[string]uint64, cutoff int64, seen map[uint64]bool) ([]storage.Page, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	p := s.rdb.Pipeline()
	cmds := make(map[string]*redis.ScanCmd, len(shards))
	for key, cursor := range shards {
		cmds[key] = p.HScan(ctx, key, cursor, "", duePageScan)
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, s.wrap("due pages", err)
	}
	var out []storage.Page
	for key, c := range cmds {
		kv, next := c.Val()
		for i := 0; i+1 < len(kv); i += 2 {
			if len(kv[i]) != 8 {
				continue
			}
			pg := storage.Page{ID: binary.BigEndian.Uint64([]byte(kv[i]))}
			if seen[pg.ID] {
				continue
			}
			seen[pg.ID] = true
			if err := pg.State.UnmarshalBinary([]byte(kv[i+1])); err != nil {
				return nil, fmt.Errorf("redisstore: page %d: %w", pg.ID, err)
			}
			if pg.State.DueMillis() <= cutoff {
				out = append(out, pg)
			}
		}
		if next == 0 {
			delete(shards, key)
		} else {
			shards[key] = next
		}
	}
	return out, nil
}
