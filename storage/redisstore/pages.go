package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
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

var _ storage.PageAcker = (*Store)(nil)

// ackPagesScript is ackScript that also stores page states: KEYS queue,
// leases, expiry, delayed, then one pages hash per page; ARGV group, the
// number of ID/token pairs, the pairs, then per page the 0-based index of
// its pair, its field and its value. A page is stored only when its pair's
// lease was held and is acknowledged. Returns the indexes of pairs whose
// lease is not held.
var ackPagesScript = redis.NewScript(`
local unknown, acked = {}, {}
local n = tonumber(ARGV[2])
for i = 0, n - 1 do
	local id, tok = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
	local cur = redis.call('HGET', KEYS[2], id)
	if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
		redis.call('XACK', KEYS[1], ARGV[1], id)
		redis.call('XDEL', KEYS[1], id)
		redis.call('HDEL', KEYS[2], id)
		redis.call('ZREM', KEYS[3], id)
		redis.call('ZREM', KEYS[4], id)
		acked[i] = true
	else
		unknown[#unknown + 1] = i
	end
end
local base = 3 + 2 * n
for j = 5, #KEYS do
	local a = base + 3 * (j - 5)
	if acked[tonumber(ARGV[a])] then
		redis.call('HSET', KEYS[j], ARGV[a + 1], ARGV[a + 2])
	end
end
return unknown
`)

// AckPages implements storage.PageAcker. On one server (no Partitions) the
// entries are acknowledged and the states of those acknowledged stored by
// one script, which Redis runs whole: a consumer killed meanwhile leaves
// both or neither. A partitioned frontier (and a cluster) keeps entries
// and pages in different slots, which no script spans: the entries are
// acknowledged first and the states of those acknowledged stored after,
// so a consumer killed between the two leaves a page its older state (a
// later recrawl reports its change once more; the interrupted one's
// report stays exact). States are stored only when every partition
// answered.
func (s *Store) AckPages(ctx context.Context, ids []string, pages []storage.LeasePage) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.ackPagesParts(ctx, ids, pages)
	}
	if len(ids) == 0 {
		return nil
	}
	var unknown []string
	pair := make(map[string]int, len(ids))
	args := []any{group, 0}
	for _, id := range ids {
		sid, tok, ok := parseLeaseID(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		pair[id] = len(pair)
		args = append(args, sid, tok)
	}
	args[1] = len(pair)
	keys := []string{s.key("queue"), s.key("leases"), s.key("expiry"), s.key("delayed")}
	var writes []pageWrite
	for _, p := range pages {
		i, ok := pair[p.Lease]
		if !ok {
			continue
		}
		b, _ := p.Page.State.MarshalBinary() // never fails: the error is encoding.BinaryMarshaler's
		writes = append(writes, pageWrite{key: s.pagesKey(p.Page.ID), field: pageField(p.Page.ID), pair: i, value: b})
	}
	var err error
	if anyHosted(args, 2) {
		unknown, err = s.ackHosted(ctx, args[2:], writes, unknown)
	} else {
		for _, w := range writes {
			keys = append(keys, w.key)
			args = append(args, w.pair, w.field, w.value)
		}
		// The pairs come first after the count; the pages' triples follow them.
		unknown, err = s.runPairs(ctx, "ack", ackPagesScript, keys, args, 2, unknown)
	}
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: ack %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// ackPagesParts is AckPages on a partitioned frontier: acknowledge, then
// store the states of the leases that were held.
func (s *Store) ackPagesParts(ctx context.Context, ids []string, pages []storage.LeasePage) error {
	var mu sync.Mutex
	notHeld := map[string]bool{}
	err := s.ackParts(ctx, ids, func(id string) {
		mu.Lock()
		notHeld[id] = true
		mu.Unlock()
	})
	if err != nil && !errors.Is(err, storage.ErrUnknownLease) {
		return err
	}
	inIDs := make(map[string]bool, len(ids))
	for _, id := range ids {
		inIDs[id] = true
	}
	var states []storage.Page
	for _, p := range pages {
		if inIDs[p.Lease] && !notHeld[p.Lease] {
			states = append(states, p.Page)
		}
	}
	if perr := s.PutPages(ctx, states...); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}
