package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// A partitioned frontier is several queues, each the stream and lease keys
// of the single-queue layout under one hash tag, so that each queue's
// scripts stay within one cluster slot. The crawl's Store routes: an entry
// goes to the partition of its URL's host (so per-host order and the
// frontier's look-ahead by host hold within a partition), a lease ID
// carries its partition ("<partition>/<stream ID>:<token>"), and Lease asks
// the partitions in turn, from a cursor that moves on every call. Each
// partition is a Store (see Store.parts) whose methods are the single-queue
// ones.

// partition sets up s's partitions: n of them (0: the default), agreed
// with the other Stores of the crawl.
func (s *Store) partition(ctx context.Context, want int) error {
	cc, isCluster := s.rdb.(*redis.ClusterClient)
	s.cluster = isCluster && !tagged(s.prefix)
	def := 1
	if s.cluster {
		m, err := countMasters(ctx, cc)
		if err != nil {
			return fmt.Errorf("redisstore: listing the cluster's masters: %w", err)
		}
		def = max(m, 1)
	}
	n, err := agreeCount(ctx, s.rdb, s.key("partitions"), "Partitions", want, def)
	if err != nil {
		return err
	}
	if n == 1 && !s.cluster {
		return nil // the single stream, keys as in earlier versions
	}
	perPart := 0
	if s.maxSize > 0 {
		perPart = (s.maxSize + n - 1) / n
	}
	s.parts = make([]*Store, n)
	for i := range s.parts {
		s.parts[i] = &Store{rdb: s.rdb, prefix: s.prefix, maxSize: perPart, shards: s.shards,
			consumer: s.consumer, closed: s.closed, tag: partitionTag(s.prefix, i, n), cluster: s.cluster, noWait: s.noWait}
	}
	return nil
}

// Partitions returns the number of queues the frontier is split into (1
// for the single stream).
func (s *Store) Partitions() int { return max(len(s.parts), 1) }

// partOf returns the partition of an entry: by its host, FNV-1a hashed.
func (s *Store) partOf(data []byte) int { return s.partOfHost(entryHost(data)) }

// urlField starts a marshalled magpie.Request, whose first field is its URL.
var urlField = []byte(`{"URL":"`)

// entryHost returns the host (with port, lower case) of the URL in a
// marshalled request, or "" for data that is not one: such entries all go
// to one partition, in push order.
func entryHost(data []byte) string {
	// The fast path reads the host out of the JSON text: a URL's host
	// needs no JSON escape (a query's '&' does, hence the check on the
	// host alone).
	if rest, ok := bytes.CutPrefix(data, urlField); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 {
			if h, ok := urlHost(string(rest[:i])); ok && !strings.Contains(h, `\`) {
				return h
			}
		}
	}
	if len(data) == 0 || data[0] != '{' {
		return ""
	}
	var v struct{ URL string }
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	h, _ := urlHost(v.URL)
	return h
}

// urlHost returns the host (with port, lower case) of an absolute URL.
func urlHost(raw string) (string, bool) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	return strings.ToLower(rest), true
}

// partPushScript: KEYS queue, hosted entries; ARGV cluster flag, group,
// maxSize, then stream ID/data pairs. Returns {1, replicas}, or {0, replicas} when the
// entries do not all fit. An entry whose ID is not above the stream's last
// (another process's clock is ahead, or the stream had entries under
// later IDs) is added with an ID the server picks, after the last.
var partPushScript = redis.NewScript(luaPrelude + countReplicas + `
ensure(KEYS[1], ARGV[2])
local max = tonumber(ARGV[3])
if max > 0 and redis.call('XLEN', KEYS[1]) + redis.call('HLEN', KEYS[2]) + (#ARGV - 3) / 2 > max then
	return {0, replicas}
end
for i = 4, #ARGV, 2 do
	local r = redis.pcall('XADD', KEYS[1], ARGV[i], 'd', ARGV[i + 1])
	if type(r) == 'table' and r.err then
		redis.call('XADD', KEYS[1], '*', 'd', ARGV[i + 1])
	end
end
return {1, replicas}
`)

// pushIDs returns n stream IDs in push order, from this process's clock
// (see idClock). Entries of one Push spread over several partitions
// (several streams) keep their order in the IDs, which a Lease drawing
// from several partitions sorts its entries by; across processes the
// order is as good as their clocks agree.
func (s *Store) pushIDs(n int) []string { return s.ids.take(n) }

// pushTo appends data to partition p under ids, all or none; in a cluster
// it returns once a replica has the entries (see durableScript).
func (s *Store) pushTo(ctx context.Context, p int, ids []string, data [][]byte) error {
	part := s.parts[p]
	flag := "0"
	if s.cluster && !s.noWait {
		flag = "1"
	}
	args := make([]any, 0, 2*len(data)+3)
	args = append(args, flag, group, part.maxSize)
	for i, d := range data {
		args = append(args, ids[i], d)
	}
	res, err := s.durableScript(ctx, partPushScript, []string{part.key("queue"), part.key("hq:e")}, args...)
	if err != nil {
		return s.wrap("push", err)
	}
	if len(res) != 1 {
		return s.wrap("push", errBadReply)
	}
	if res[0] == 0 {
		return fmt.Errorf("redisstore: push %d entries to partition %d: %w", len(data), p, storage.ErrQueueFull)
	}
	return nil
}

// byPart groups the indexes of data by partition.
func (s *Store) byPart(n int, data func(i int) []byte) map[int][]int {
	groups := map[int][]int{}
	for i := range n {
		p := s.partOf(data(i))
		groups[p] = append(groups[p], i)
	}
	return groups
}

// eachPart calls f for every partition in groups, at once, and returns
// their errors (nil entries for successes), by partition.
func eachPart[T any](groups map[int]T, f func(p int, g T) error) map[int]error {
	errs := make(map[int]error, len(groups))
	if len(groups) == 1 {
		for p, g := range groups {
			errs[p] = f(p, g)
		}
		return errs
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, g := range groups {
		wg.Go(func() {
			err := f(p, g)
			mu.Lock()
			errs[p] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// joinParts merges the partitions' errors. A failure other than an unknown
// lease wins: the caller retries the whole call, and the leases a partition
// settled before come back as unknown then. bad are lease IDs no partition
// owns.
func joinParts(op string, errs map[int]error, bad []string) error {
	var failed, unknown []error
	for _, p := range slices.Sorted(maps.Keys(errs)) {
		switch err := errs[p]; {
		case err == nil:
		case errors.Is(err, storage.ErrUnknownLease):
			unknown = append(unknown, err)
		default:
			failed = append(failed, fmt.Errorf("partition %d: %w", p, err))
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if len(bad) > 0 {
		unknown = append(unknown, fmt.Errorf("redisstore: %s %q: %w", op, bad, storage.ErrUnknownLease))
	}
	return errors.Join(unknown...)
}

// pushParts is Push on a partitioned frontier: one script per partition
// touched, at once. All or none holds per partition: when one partition
// fails the others may have taken their entries.
func (s *Store) pushParts(ctx context.Context, data [][]byte) error {
	if len(data) == 0 {
		return nil
	}
	groups := s.byPart(len(data), func(i int) []byte { return data[i] })
	ids := s.pushIDs(len(data))
	return joinParts("push", eachPart(groups, func(p int, idx []int) error {
		d, id := make([][]byte, len(idx)), make([]string, len(idx))
		for j, i := range idx {
			d[j], id[j] = data[i], ids[i]
		}
		return s.pushTo(ctx, p, id, d)
	}), nil)
}

// leaseParts is Lease on a partitioned frontier, in two round trips, each
// to every partition at once (see leaseSplit): the IDs of the entries each
// would give, then the n oldest of those. The entries come in push order
// across partitions, as far as the pushing processes' clocks agree (see
// pushIDs).
func (s *Store) leaseParts(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	return s.leaseSplit(ctx, n, false,
		func(p int) ([]entryKey, error) { return s.parts[p].peekLease(ctx, n) },
		func(p, k int) ([]storage.Entry, error) { return s.parts[p].lease(ctx, k, ttl) })
}

// leaseSplit leases up to n entries of a partitioned frontier: peek lists,
// for every partition at once, the keys of the entries it would give;
// take leases the k best of a partition, for every partition among the n
// best keys at once. Another consumer leasing in between may make a
// partition give its next best instead. The entries come best first: by
// priority, when byPriority, then push order.
//
// A partition that fails does not keep the others' entries from being
// leased: its failure is returned by the next call instead (by this one
// when nothing was leased), so that the caller, which holds the entries
// granted by then, takes back what the failed call may have granted
// (storage.LeaseReclaimer).
func (s *Store) leaseSplit(ctx context.Context, n int, byPriority bool, peek func(p int) ([]entryKey, error), take func(p, k int) ([]storage.Entry, error)) ([]storage.Entry, error) {
	if err := s.leaseErr.Swap(nil); err != nil {
		return nil, *err
	}
	type partKey struct {
		p   int
		key entryKey
	}
	var mu sync.Mutex
	var keys []partKey
	peeked := eachPart(s.all(), func(p int, _ struct{}) error {
		ks, err := peek(p)
		mu.Lock()
		for _, k := range ks {
			keys = append(keys, partKey{p, k})
		}
		mu.Unlock()
		return err
	})
	slices.SortStableFunc(keys, func(a, b partKey) int { return a.key.compare(b.key) })
	counts := map[int]int{}
	for _, k := range keys[:min(n, len(keys))] {
		counts[k.p]++
	}
	type leased struct {
		key entryKey
		e   storage.Entry
	}
	var out []leased
	taken := eachPart(counts, func(p, k int) error {
		es, err := take(p, k)
		mu.Lock()
		for _, e := range es {
			sid, _, _ := parseLeaseID(e.ID)
			ms, seq := parseStreamID(trimHosted(sid))
			e.ID = strconv.Itoa(p) + "/" + e.ID
			key := entryKey{ms: int64(ms), seq: int64(seq)}
			if byPriority {
				key.prio = int64(e.Priority)
			}
			out = append(out, leased{key, e})
		}
		mu.Unlock()
		return err
	})
	maps.Copy(peeked, taken)
	if err := joinParts("lease", peeked, nil); err != nil {
		if len(out) == 0 {
			return nil, err
		}
		if ctx.Err() == nil && !errors.Is(err, storage.ErrClosed) {
			s.leaseErr.Store(&err)
		}
	}
	if len(out) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	slices.SortStableFunc(out, func(a, b leased) int { return a.key.compare(b.key) })
	entries := make([]storage.Entry, len(out))
	for i, l := range out {
		entries[i] = l.e
	}
	return entries, nil
}

// splitLease splits "<partition>/<lease ID>".
func (s *Store) splitLease(id string) (p int, rest string, ok bool) {
	ps, rest, found := strings.Cut(id, "/")
	if !found {
		return 0, "", false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p >= len(s.parts) {
		return 0, "", false
	}
	return p, rest, true
}

// groupLeases groups lease IDs by partition; bad are those of none.
func (s *Store) groupLeases(ids []string) (groups map[int][]string, bad []string) {
	groups = map[int][]string{}
	for _, id := range ids {
		p, rest, ok := s.splitLease(id)
		if !ok {
			bad = append(bad, id)
			continue
		}
		groups[p] = append(groups[p], rest)
	}
	return groups, bad
}

// partAckScript is ackScript with the cluster flag first (ARGV[1]) and the
// master's connected replicas last in the reply (see durableScript).
var partAckScript = redis.NewScript(countReplicas + `
local unknown = {}
for i = 3, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local cur = redis.call('HGET', KEYS[2], id)
	if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
		redis.call('XACK', KEYS[1], ARGV[2], id)
		redis.call('XDEL', KEYS[1], id)
		redis.call('HDEL', KEYS[2], id)
		redis.call('ZREM', KEYS[3], id)
		redis.call('ZREM', KEYS[4], id)
	else
		unknown[#unknown + 1] = (i - 3) / 2
	end
end
unknown[#unknown + 1] = replicas
return unknown
`)

// ackParts acknowledges leases of several partitions, one script per
// partition at once. In a cluster an acknowledgement returns once a replica
// has it: one lost with its master would leave the entry leased to a
// consumer that no longer holds it until the lease expired. notHeld, when
// not nil, is called (from several goroutines) with each ID whose lease
// was not held.
func (s *Store) ackParts(ctx context.Context, ids []string, notHeld func(id string)) error {
	if len(ids) == 0 {
		return nil
	}
	if notHeld == nil {
		notHeld = func(string) {}
	}
	groups, bad := s.groupLeases(ids)
	for _, id := range bad {
		notHeld(id)
	}
	flag := "0"
	if s.cluster && !s.noWait {
		flag = "1"
	}
	return joinParts("ack", eachPart(groups, func(p int, g []string) error {
		part := s.parts[p]
		args, unknown := leasePairs(g, flag, group)
		for _, rest := range unknown {
			notHeld(fmt.Sprintf("%d/%s", p, rest))
		}
		if anyHosted(args, 2) {
			bad, err := part.ackHosted(ctx, args[2:], nil, nil)
			if err != nil {
				return err
			}
			for _, id := range bad {
				notHeld(fmt.Sprintf("%d/%s", p, id))
				unknown = append(unknown, fmt.Sprintf("%d/%s", p, id))
			}
		} else if len(args) > 2 {
			bad, err := s.durableScript(ctx, partAckScript,
				[]string{part.key("queue"), part.key("leases"), part.key("expiry"), part.key("delayed")}, args...)
			if err != nil {
				return s.wrap("ack", err)
			}
			for _, i := range bad {
				id := fmt.Sprintf("%d/%s:%s", p, args[2+2*i], args[3+2*i])
				unknown = append(unknown, id)
				notHeld(id)
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("redisstore: ack %q: %w", unknown, storage.ErrUnknownLease)
		}
		return nil
	}), bad)
}

func (s *Store) releaseParts(ctx context.Context, id string, notBefore time.Time) error {
	p, rest, ok := s.splitLease(id)
	if !ok {
		return fmt.Errorf("redisstore: release %q: %w", id, storage.ErrUnknownLease)
	}
	return s.parts[p].Release(ctx, rest, notBefore)
}

func (s *Store) renewParts(ctx context.Context, ttl time.Duration, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	groups, bad := s.groupLeases(ids)
	return joinParts("renew", eachPart(groups, func(p int, g []string) error { return s.parts[p].Renew(ctx, ttl, g...) }), bad)
}

func (s *Store) releaseBatchParts(ctx context.Context, notBefore time.Time, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	groups, bad := s.groupLeases(ids)
	return joinParts("release", eachPart(groups, func(p int, g []string) error {
		return s.parts[p].ReleaseBatch(ctx, notBefore, g...)
	}), bad)
}

// all maps every partition to nothing, for eachPart.
func (s *Store) all() map[int]struct{} {
	m := make(map[int]struct{}, len(s.parts))
	for p := range s.parts {
		m[p] = struct{}{}
	}
	return m
}

// lenParts sums the partitions' lengths, read at once.
func (s *Store) lenParts(ctx context.Context) (storage.QueueLen, error) {
	var mu sync.Mutex
	var total storage.QueueLen
	errs := eachPart(s.all(), func(p int, _ struct{}) error {
		l, err := s.parts[p].Len(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		total.Ready += l.Ready
		total.Delayed += l.Delayed
		total.Leased += l.Leased
		mu.Unlock()
		return nil
	})
	if err := joinParts("len", errs, nil); err != nil {
		return storage.QueueLen{}, err
	}
	return total, nil
}

func (s *Store) releaseUnheldParts(ctx context.Context, held []string) error {
	groups, _ := s.groupLeases(held)
	return joinParts("release unheld", eachPart(s.all(), func(p int, _ struct{}) error {
		return s.parts[p].ReleaseUnheld(ctx, groups[p])
	}), nil)
}

func (s *Store) releaseOwnParts(ctx context.Context) error {
	return joinParts("close", eachPart(s.all(), func(p int, _ struct{}) error {
		return s.parts[p].releaseOwn(ctx)
	}), nil)
}

// pushUnvisitedParts is PushUnvisited on a partitioned frontier, in two
// steps whatever the number of links: the visited shards the keys fall in
// are read with one SMISMEMBER each, pipelined (in a cluster, one round
// trip to each master at once), then the unvisited entries are pushed with
// one script per partition touched, at once. The two steps are not one
// atomic script, as the shards and the partitions live in different slots;
// nothing depends on it: PushUnvisited marks nothing, and an entry whose
// key another process marks in between is refused as visited when it is
// leased, not fetched twice.
func (s *Store) pushUnvisitedParts(ctx context.Context, keys []uint64, data [][]byte) ([]bool, error) {
	if len(data) == 0 {
		return make([]bool, 0), nil
	}
	pushed, err := s.unvisitedShards(ctx, keys)
	if err != nil {
		return nil, err
	}
	var todo []int // push order is the caller's order, within each partition
	for i, ok := range pushed {
		if ok {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return pushed, nil
	}
	groups := s.byPart(len(todo), func(j int) []byte { return data[todo[j]] })
	ids := s.pushIDs(len(todo))
	err = joinParts("push unvisited", eachPart(groups, func(p int, js []int) error {
		d, id := make([][]byte, len(js)), make([]string, len(js))
		for n, j := range js {
			d[n], id[n] = data[todo[j]], ids[j]
		}
		return s.pushTo(ctx, p, id, d)
	}), nil)
	if err != nil {
		return nil, err
	}
	return pushed, nil
}

// unvisitedShards reports, per key, whether it is absent from the visited
// set, with one SMISMEMBER per visited shard the keys fall in, pipelined
// (in a cluster, one round trip to each master at once).
func (s *Store) unvisitedShards(ctx context.Context, keys []uint64) ([]bool, error) {
	shards := map[string][]int{}
	for i, k := range keys {
		vk := s.visitedKey(k)
		shards[vk] = append(shards[vk], i)
	}
	pipe := s.rdb.Pipeline()
	cmds := make(map[string]*redis.BoolSliceCmd, len(shards))
	for vk, idx := range shards {
		members := make([]any, len(idx))
		for j, i := range idx {
			members[j] = member(keys[i])
		}
		cmds[vk] = pipe.SMIsMember(ctx, vk, members...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("push unvisited", err)
	}
	absent := make([]bool, len(keys))
	for vk, idx := range shards {
		seen := cmds[vk].Val()
		if len(seen) != len(idx) {
			return nil, s.wrap("push unvisited", errBadReply)
		}
		for j, i := range idx {
			absent[i] = !seen[j]
		}
	}
	return absent, nil
}
