package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

var _ storage.HostQueue = (*Store)(nil)

// errBadLease is wrapped by LeaseHosts for n < 1 or ttl <= 0: it is this
// package's ErrInvalidArgument, as Lease returns, and storage's.
var errBadLease = fmt.Errorf("%w (%w)", ErrInvalidArgument, storage.ErrInvalidArgument)

// hqKeys lists the keys of the host queue's scripts, in the order
// hqPrelude names them.
func (s *Store) hqKeys() []string {
	return []string{
		s.key("queue"), s.key("leases"), s.key("expiry"), s.key("delayed"), s.key("lastid"),
		s.key("hq:e"), s.key("hq:l"), s.key("hq:x"), s.key("hq:d"), s.key("hq:f"),
		s.key("hq:a"), s.key("hq:r"), s.key("hq:w"), s.key("hq:b"), s.key("hq:t"), s.key("hq:n"),
		s.key("hq:o:" + s.consumer),
	}
}

// hqArgs starts the ARGV of a host queue script, with room for n more.
func (s *Store) hqArgs(n int) []any {
	flag := "0"
	if s.cluster && !s.noWait {
		flag = "1"
	}
	return append(make([]any, 0, 4+n), flag, s.key("hq:h:"), s.key("hq:o:"), group)
}

// PushHosted implements storage.HostQueue: it appends entries, all or
// none, each to its host with its priority, in one script. An entry of
// host "" and priority 0 is what Push appends, and goes where Push puts
// it. It returns an error wrapping storage.ErrPriorityRange, pushing
// nothing, for a priority outside the int32 range, and
// storage.ErrQueueFull as Push does. On a partitioned frontier each host's
// entries go to the partition of the host (see Options.Partitions), all or
// none per partition.
func (s *Store) PushHosted(ctx context.Context, entries ...storage.HostEntry) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		if err := storage.CheckPriority(e.Priority); err != nil {
			return fmt.Errorf("redisstore: push hosted: host %q, priority %d: %w", e.Host, e.Priority, err)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	if s.parts != nil {
		return s.pushHostedParts(ctx, entries)
	}
	return s.pushHosted(ctx, entries, nil)
}

// pushHosted runs hqPushScript on s's keys. ids, when not nil, proposes
// each entry's ID (a partitioned frontier's, from this process's clock);
// the server's clock gives them otherwise.
func (s *Store) pushHosted(ctx context.Context, entries []storage.HostEntry, ids []string) error {
	stride := 3
	if ids != nil {
		stride = 4
	}
	args := append(s.hqArgs(2+stride*len(entries)), s.maxSize, stride)
	for i, e := range entries {
		args = append(args, e.Host, e.Priority, e.Data)
		if ids != nil {
			args = append(args, ids[i])
		}
	}
	res, err := s.durableScript(ctx, hqPushScript, s.hqKeys(), args...)
	if err != nil {
		return s.wrap("push hosted", err)
	}
	if len(res) != 1 {
		return s.wrap("push hosted", errBadReply)
	}
	if res[0] == 0 {
		return fmt.Errorf("redisstore: push %d entries: %w", len(entries), storage.ErrQueueFull)
	}
	return nil
}

var _ storage.HostVisitedPusher = (*Store)(nil)

// PushUnvisitedHosted implements storage.HostVisitedPusher: the keys are
// looked up in the visited set and the entries whose keys are absent are
// pushed as PushHosted pushes them, atomically, in one script; it reports
// per entry whether it was pushed, and marks nothing visited. With
// Options.MaxSize it returns storage.ErrQueueFull, pushing nothing, when
// those do not all fit; storage.ErrPriorityRange as PushHosted. A
// partitioned frontier takes two steps, as PushUnvisited does there (the
// lookup, then the pushes), and so do expiring marks (Options.VisitedTTL).
func (s *Store) PushUnvisitedHosted(ctx context.Context, keys []uint64, entries []storage.HostEntry) ([]bool, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(keys) != len(entries) {
		return nil, fmt.Errorf("redisstore: push unvisited hosted: %w: %d keys, %d entries", storage.ErrLengthMismatch, len(keys), len(entries))
	}
	for _, e := range entries {
		if err := storage.CheckPriority(e.Priority); err != nil {
			return nil, fmt.Errorf("redisstore: push unvisited hosted: host %q, priority %d: %w", e.Host, e.Priority, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return make([]bool, 0), nil
	}
	var absent []bool
	var err error
	switch {
	case s.ttl > 0:
		absent, err = s.unvisitedTTL(ctx, keys)
	case s.parts != nil:
		absent, err = s.unvisitedShards(ctx, keys)
	default:
		return s.pushUnvisitedHosted(ctx, keys, entries)
	}
	if err != nil {
		return nil, err
	}
	todo := make([]storage.HostEntry, 0, len(entries))
	for i, ok := range absent {
		if ok {
			todo = append(todo, entries[i])
		}
	}
	if len(todo) > 0 {
		if err := s.PushHosted(ctx, todo...); err != nil {
			return nil, err
		}
	}
	return absent, nil
}

// pushUnvisitedHosted runs hqPushUnvisitedScript on s's keys and the
// visited shards of keys.
func (s *Store) pushUnvisitedHosted(ctx context.Context, keys []uint64, entries []storage.HostEntry) ([]bool, error) {
	rkeys := slices.Grow(s.hqKeys(), len(keys))
	args := append(s.hqArgs(1+4*len(entries)), s.maxSize)
	for i, e := range entries {
		rkeys = append(rkeys, s.visitedKey(keys[i]))
		args = append(args, member(keys[i]), e.Host, e.Priority, e.Data)
	}
	res, err := s.durableScript(ctx, hqPushUnvisitedScript, rkeys, args...)
	if err != nil {
		return nil, s.wrap("push unvisited hosted", err)
	}
	if len(res) != len(entries)+1 {
		return nil, s.wrap("push unvisited hosted", errBadReply)
	}
	if res[0] == 1 {
		return nil, fmt.Errorf("redisstore: push unvisited hosted %d entries: %w", len(entries), storage.ErrQueueFull)
	}
	pushed := make([]bool, len(entries))
	for i := range pushed {
		pushed[i] = res[i+1] == 1
	}
	return pushed, nil
}

// LeaseHosts implements storage.HostQueue in one script: up to n entries
// of the hosts whose ready time is not after now and that hold fewer than
// perHost leases, best first (priority, then push order) across hosts,
// each host giving at most perHost minus its leases. Host "" (Push's
// entries) has neither a limit nor a ready time. Hosts' ready times are
// compared with now, the caller's clock (SetHostReady takes the same
// clock), and each entry carries its host's in Entry.HostReady; lease
// deadlines and entries' not-before times are the server's, as for Lease.
// It returns storage.ErrQueueEmpty when nothing can be handed out. On a partitioned frontier it takes two round trips, each to
// every partition at once: one to list what each would give, one to
// lease the n best of those.
func (s *Store) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 || ttl <= 0 {
		return nil, fmt.Errorf("redisstore: lease hosts(%d, %v): %w", n, ttl, errBadLease)
	}
	if s.parts != nil {
		return s.leaseHostsParts(ctx, now, n, perHost, ttl)
	}
	es, err := s.leaseHosts(ctx, now, n, perHost, ttl)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	return es, nil
}

// leaseHosts runs hqLeaseHostsScript on s's keys.
func (s *Store) leaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	token := newToken()
	args := append(s.hqArgs(7), now.UnixMilli(), n, perHost, ttlMillis(ttl), token, s.consumer, "0")
	res, err := hqLeaseHostsScript.Run(ctx, s.rdb, s.hqKeys(), args...).Slice()
	if err != nil {
		return nil, s.wrap("lease hosts", err)
	}
	return leaseRows(res, token)
}

// readyMillis is t in ms, rounded up: a host is never ready before the
// time given.
func readyMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// SetHostReady implements storage.HostQueue in one script (on a
// partitioned frontier, one per partition, at once): each host keeps the
// later of its stored ready time and the one given. Times are kept to the
// millisecond, rounded up, and persist as the entries do; a host with no
// entries left forgets its time once the time has passed. Host "" is
// ignored: Push's entries have no ready time.
func (s *Store) SetHostReady(ctx context.Context, ready map[string]time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ready) == 0 || len(ready) == 1 && hasHost(ready, "") {
		return nil
	}
	if s.parts != nil {
		return s.setHostReadyParts(ctx, ready)
	}
	args := s.hqArgs(2 * len(ready))
	for h, t := range ready {
		if h != "" {
			args = append(args, h, readyMillis(t))
		}
	}
	return s.wrap("set host ready", hqReadyScript.Run(ctx, s.rdb, s.hqKeys(), args...).Err())
}

// Head implements storage.HostQueue: up to n pending entries, hosts by
// their next entry (priority, then push order), each host's in lease
// order, then the entries waiting for their own not-before time. It
// leases nothing, but takes back expired leases and requeues due
// releases, as a lease would.
func (s *Store) Head(ctx context.Context, n int) ([]storage.HeadEntry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 {
		return []storage.HeadEntry{}, nil
	}
	var parts []*headPart
	if s.parts != nil {
		var err error
		if parts, err = s.headParts(ctx, n); err != nil {
			return nil, err
		}
	} else {
		p, err := s.head(ctx, n)
		if err != nil {
			return nil, err
		}
		parts = []*headPart{p}
	}
	return mergeHeads(parts, n), nil
}

// hasHost reports whether ready has a time for host.
func hasHost(ready map[string]time.Time, host string) bool {
	_, ok := ready[host]
	return ok
}

// headPart is one partition's answer to Head.
type headPart struct {
	groups  []headGroup
	delayed []headItem
}

// headGroup is a host's pending entries, keyed by its first.
type headGroup struct {
	host  string
	ready int64 // ms; 0 when none is set
	key   entryKey
	items []headItem
}

// entryKey orders entries as LeaseHosts does: priority, then push order.
type entryKey struct {
	prio    int64
	ms, seq int64
}

func (a entryKey) compare(b entryKey) int {
	return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.ms, b.ms), cmp.Compare(a.seq, b.seq))
}

type headItem struct {
	host      string
	key       entryKey
	data      string
	nb, ready int64 // ms; 0 when none
	hasReady  bool
	hasNB     bool
}

// head runs hqHeadScript on s's keys.
func (s *Store) head(ctx context.Context, n int) (*headPart, error) {
	res, err := hqHeadScript.Run(ctx, s.rdb, s.hqKeys(), append(s.hqArgs(1), n)...).Slice()
	if err != nil {
		return nil, s.wrap("head", err)
	}
	p, err := parseHead(res)
	if err != nil {
		return nil, s.wrap("head", err)
	}
	return p, nil
}

// parseHead reads hqHeadScript's reply.
func parseHead(res []any) (*headPart, error) {
	if len(res) != 2 {
		return nil, errBadReply
	}
	groups, ok1 := res[0].([]any)
	delayed, ok2 := res[1].([]any)
	if !ok1 || !ok2 {
		return nil, errBadReply
	}
	p := &headPart{}
	for _, g := range groups {
		f, ok := g.([]any)
		if !ok || len(f) != 6 {
			return nil, errBadReply
		}
		host, _ := f[0].(string)
		ready, hasReady := millisField(f[1])
		items, _ := f[5].([]any)
		hg := headGroup{host: host, ready: ready, key: entryKey{asInt(f[2]), asInt(f[3]), asInt(f[4])}}
		for _, it := range items {
			e, ok := it.([]any)
			if !ok || len(e) != 4 {
				return nil, errBadReply
			}
			data, _ := e[3].(string)
			hg.items = append(hg.items, headItem{host: host, key: entryKey{asInt(e[0]), asInt(e[1]), asInt(e[2])},
				data: data, ready: ready, hasReady: hasReady})
		}
		p.groups = append(p.groups, hg)
	}
	for _, d := range delayed {
		e, ok := d.([]any)
		if !ok || len(e) != 7 {
			return nil, errBadReply
		}
		host, _ := e[0].(string)
		data, _ := e[4].(string)
		nb, hasNB := millisField(e[5])
		ready, hasReady := millisField(e[6])
		p.delayed = append(p.delayed, headItem{host: host, key: entryKey{asInt(e[1]), asInt(e[2]), asInt(e[3])},
			data: data, nb: nb, hasNB: hasNB, ready: ready, hasReady: hasReady})
	}
	return p, nil
}

// asInt reads an integer of a script's reply, which Lua may send as an
// integer or, for a score, as a string.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// millisField reads a time in ms that a script sends as a string, "" for
// none.
func millisField(v any) (int64, bool) {
	s, _ := v.(string)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// mergeHeads merges the partitions' answers: hosts by their first entry
// (a host's groups from several partitions, host "" the only one that can
// have them, merged into one), then the delayed entries by not-before.
func mergeHeads(parts []*headPart, n int) []storage.HeadEntry {
	byHost := map[string]*headGroup{}
	var groups []*headGroup
	var delayed []headItem
	for _, p := range parts {
		for i := range p.groups {
			g := &p.groups[i]
			if have, ok := byHost[g.host]; ok {
				have.items = append(have.items, g.items...)
				if g.key.compare(have.key) < 0 {
					have.key = g.key
				}
				continue
			}
			byHost[g.host] = g
			groups = append(groups, g)
		}
		delayed = append(delayed, p.delayed...)
	}
	slices.SortStableFunc(groups, func(a, b *headGroup) int { return a.key.compare(b.key) })
	out := make([]storage.HeadEntry, 0, n)
	add := func(it headItem) {
		e := storage.HeadEntry{Host: it.host, Priority: int(it.key.prio), Data: []byte(it.data)}
		if it.hasNB {
			e.NotBefore = time.UnixMilli(it.nb)
		}
		if it.hasReady {
			e.HostReady = time.UnixMilli(it.ready)
		}
		out = append(out, e)
	}
	for _, g := range groups {
		slices.SortStableFunc(g.items, func(a, b headItem) int { return a.key.compare(b.key) })
		for _, it := range g.items {
			if len(out) == n {
				return out
			}
			add(it)
		}
	}
	slices.SortStableFunc(delayed, func(a, b headItem) int {
		return cmp.Or(cmp.Compare(a.nb, b.nb), cmp.Compare(a.key.ms, b.key.ms), cmp.Compare(a.key.seq, b.key.seq))
	})
	for _, it := range delayed {
		if len(out) == n {
			break
		}
		add(it)
	}
	return out
}

// ackHosted acknowledges ID/token pairs of both kinds (and stores the
// states of pages whose lease is acknowledged, see AckPages) with
// hqAckScript on s's keys, and adds the IDs not held to unknown.
func (s *Store) ackHosted(ctx context.Context, pairs []any, pages []pageWrite, unknown []string) ([]string, error) {
	keys := s.hqKeys()
	args := append(s.hqArgs(1+len(pairs)+3*len(pages)), len(pairs)/2)
	args = append(args, pairs...)
	for _, p := range pages {
		keys = append(keys, p.key)
		args = append(args, p.pair, p.field, p.value)
	}
	bad, err := s.durableScript(ctx, hqAckScript, keys, args...)
	if err != nil {
		return nil, s.wrap("ack", err)
	}
	for _, i := range bad {
		unknown = append(unknown, fmt.Sprintf("%s:%s", pairs[2*i], pairs[2*i+1]))
	}
	return unknown, nil
}

// pageWrite is a page state AckPages stores with its entry's
// acknowledgement: in key at field, when the pair'th lease is acknowledged.
type pageWrite struct {
	key, field string
	pair       int
	value      []byte
}

// releaseHosted releases, ready now, the hosted entries leased to this
// Store's consumer, except those whose lease entry IDs ("h<ID>") are in
// keep.
func (s *Store) releaseHosted(ctx context.Context, keep map[string]bool) error {
	ids, err := s.rdb.SMembers(ctx, s.key("hq:o:"+s.consumer)).Result()
	if err != nil {
		return err
	}
	args := append(s.hqArgs(1+len(ids)), s.consumer)
	for _, id := range ids {
		if !keep["h"+id] {
			args = append(args, id)
		}
	}
	if len(args) == 5 {
		return nil
	}
	return hqReleaseOwnScript.Run(ctx, s.rdb, s.hqKeys(), args...).Err()
}
