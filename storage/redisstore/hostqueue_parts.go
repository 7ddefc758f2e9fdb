package redisstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// On a partitioned frontier a host's keys live in the partition its name
// hashes to, under the partition's hash tag, beside the partition's ready
// set: every host queue script runs on one partition's keys, so in one
// slot. Entries pushed with Push (host "") go where Push puts them, by
// their URL's host, so host "" has entries in several partitions; it has
// no ready time and no per-host limit, so none needs to be shared.

// partOfHost returns the partition of a host's entries: by its name,
// FNV-1a hashed, as partOf hashes an entry's URL host, so that a host's
// hosted entries and those Push appends for its URLs share a partition.
func (s *Store) partOfHost(host string) int {
	h := fnv.New64a()
	h.Write([]byte(host))
	return int(h.Sum64() % uint64(len(s.parts)))
}

// hostedPart returns the partition of a hosted entry.
func (s *Store) hostedPart(e storage.HostEntry) int {
	if e.Host == "" && e.Priority == 0 {
		return s.partOf(e.Data) // what Push appends
	}
	return s.partOfHost(e.Host)
}

// pushHostedParts is PushHosted on a partitioned frontier: one script per
// partition touched, at once, each entry with an ID from this process's
// clock, so that push order holds across partitions as far as the
// processes' clocks agree. All or none holds per partition.
func (s *Store) pushHostedParts(ctx context.Context, entries []storage.HostEntry) error {
	groups := map[int][]int{}
	for i, e := range entries {
		p := s.hostedPart(e)
		groups[p] = append(groups[p], i)
	}
	ids := s.pushIDs(len(entries))
	return joinParts("push hosted", eachPart(groups, func(p int, idx []int) error {
		es, id := make([]storage.HostEntry, len(idx)), make([]string, len(idx))
		for j, i := range idx {
			es[j], id[j] = entries[i], ids[i]
		}
		return s.parts[p].pushHosted(ctx, es, id)
	}), nil)
}

// leaseHostsParts is LeaseHosts on a partitioned frontier, in two round
// trips, each to every partition at once (see leaseSplit): the keys
// (priority, push order) of the entries each partition would give, then
// the n best of those, so that hosts keep their order across partitions
// as on one server.
func (s *Store) leaseHostsParts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	return s.leaseSplit(ctx, n, true,
		func(p int) ([]entryKey, error) { return s.parts[p].peekHosts(ctx, now, n, perHost) },
		func(p, k int) ([]storage.Entry, error) { return s.parts[p].leaseHosts(ctx, now, k, perHost, ttl) })
}

// trimHosted drops the "h" of a hosted entry's ID.
func trimHosted(id string) string {
	if len(id) > 0 && id[0] == 'h' {
		return id[1:]
	}
	return id
}

// peekHosts runs hqLeaseHostsScript on s's keys without leasing: the keys
// of the entries it would give, best first.
func (s *Store) peekHosts(ctx context.Context, now time.Time, n, perHost int) ([]entryKey, error) {
	args := append(s.hqArgs(7), now.UnixMilli(), n, perHost, 1, "", s.consumer, "1")
	res, err := hqLeaseHostsScript.Run(ctx, s.rdb, s.hqKeys(), args...).Slice()
	if err != nil {
		return nil, s.wrap("lease hosts", err)
	}
	keys := make([]entryKey, 0, len(res))
	for _, r := range res {
		k, ok := r.([]any)
		if !ok || len(k) != 3 {
			return nil, fmt.Errorf("redisstore: lease hosts: unexpected reply %v", r)
		}
		keys = append(keys, entryKey{asInt(k[0]), asInt(k[1]), asInt(k[2])})
	}
	return keys, nil
}

// setHostReadyParts is SetHostReady on a partitioned frontier: one script
// per partition holding one of the hosts, at once. Host "" is skipped.
func (s *Store) setHostReadyParts(ctx context.Context, ready map[string]time.Time) error {
	groups := map[int]map[string]time.Time{}
	for h, t := range ready {
		if h == "" {
			continue
		}
		p := s.partOfHost(h)
		if groups[p] == nil {
			groups[p] = map[string]time.Time{}
		}
		groups[p][h] = t
	}
	return joinParts("set host ready", eachPart(groups, func(p int, g map[string]time.Time) error {
		return s.parts[p].SetHostReady(ctx, g)
	}), nil)
}

// headParts asks every partition for its head, at once.
func (s *Store) headParts(ctx context.Context, n int) ([]*headPart, error) {
	parts := make([]*headPart, len(s.parts))
	err := joinParts("head", eachPart(s.all(), func(p int, _ struct{}) error {
		hp, err := s.parts[p].head(ctx, n)
		parts[p] = hp
		return err
	}), nil)
	if err != nil {
		return nil, err
	}
	return parts, nil
}

// idClock hands out push IDs "<ms>-<seq>": this process's clock in ms and
// a number within the ms, so that they only grow (a ms that gives more
// than a million borrows the next).
type idClock struct {
	// mu guards ms and seq, the last ID given.
	mu      sync.Mutex
	ms, seq int64
}

// take returns n IDs in order.
func (c *idClock) take(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now().UnixMilli(); now > c.ms {
		c.ms, c.seq = now, -1
	}
	ids := make([]string, n)
	for i := range ids {
		if c.seq++; c.seq > maxIDSeq {
			c.ms, c.seq = c.ms+1, 0
		}
		ids[i] = strconv.FormatInt(c.ms, 10) + "-" + strconv.FormatInt(c.seq, 10)
	}
	return ids
}

// maxIDSeq is the largest sequence number of an ID: a hosted entry's ID
// has 6 digits for it (see hostqueue_lua.go).
const maxIDSeq = 999_999
