package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// luaPrelude is shared by the queue scripts: the server clock in ms, the
// stream's creation with its group (so XREADGROUP never meets a missing
// group), and a stream-field lookup.
const luaPrelude = `
local function nowms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ensure(stream, group)
	if redis.call('EXISTS', stream) == 0 then
		redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
	end
end
local function field(fields, name)
	for i = 1, #fields, 2 do
		if fields[i] == name then return fields[i + 1] end
	end
	return nil
end
`

// plainAdd is Lua that appends entries to a stream. Once a hosted entry
// was pushed (lastKey holds the last ID a push issued, see hqPushScript),
// the IDs continue from it, so that push order holds across both kinds.
const plainAdd = `
local function plainAdd(q, lastKey, datas)
	local last = redis.call('GET', lastKey)
	if not last then
		for _, data in ipairs(datas) do redis.call('XADD', q, '*', 'd', data) end
		return
	end
	local c = string.find(last, '-', 1, true)
	local ms, seq = tonumber(string.sub(last, 1, c - 1)), tonumber(string.sub(last, c + 1))
	local now = nowms()
	if now > ms then ms, seq = now, -1 end
	for _, data in ipairs(datas) do
		seq = seq + 1
		if seq > 999999 then ms, seq = ms + 1, 0 end
		local r = redis.pcall('XADD', q, ms .. '-' .. seq, 'd', data)
		if type(r) == 'table' and r.err then
			r = redis.call('XADD', q, '*', 'd', data)
			c = string.find(r, '-', 1, true)
			ms, seq = tonumber(string.sub(r, 1, c - 1)), tonumber(string.sub(r, c + 1))
		end
	end
	redis.call('SET', lastKey, ms .. '-' .. seq)
end
`

// pushScript: KEYS queue, lastid, hosted entries; ARGV group, maxSize,
// data...
var pushScript = redis.NewScript(luaPrelude + plainAdd + `
ensure(KEYS[1], ARGV[1])
local max = tonumber(ARGV[2])
if max > 0 and redis.call('XLEN', KEYS[1]) + redis.call('HLEN', KEYS[3]) + #ARGV - 2 > max then
	return 0
end
local datas = {}
for i = 3, #ARGV do datas[#datas + 1] = ARGV[i] end
plainAdd(KEYS[1], KEYS[2], datas)
return 1
`)

// ackScript: KEYS queue, leases, expiry, delayed; ARGV group, then
// ID/token pairs. Returns the 0-based indexes of pairs whose lease is not held.
var ackScript = redis.NewScript(`
local unknown = {}
for i = 2, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local cur = redis.call('HGET', KEYS[2], id)
	if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
		redis.call('XACK', KEYS[1], ARGV[1], id)
		redis.call('XDEL', KEYS[1], id)
		redis.call('HDEL', KEYS[2], id)
		redis.call('ZREM', KEYS[3], id)
		redis.call('ZREM', KEYS[4], id)
	else
		unknown[#unknown + 1] = (i - 2) / 2
	end
end
return unknown
`)

// releaseScript: KEYS leases, expiry, delayed; ARGV stream ID, token,
// delay ms. Returns 1, or 0 when the lease is not held. The entry stays in
// the stream, so it keeps its place in push order; an empty token marks it
// released, so the old lease ID stops working.
var releaseScript = redis.NewScript(luaPrelude + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or ARGV[2] == '' then return 0 end
local c = string.find(cur, ':', 1, true)
if string.sub(cur, 1, c - 1) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], string.sub(cur, c))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], nowms() + tonumber(ARGV[3]), ARGV[1])
return 1
`)

// releaseAllScript: KEYS leases, expiry, delayed; ARGV stream IDs of this
// consumer's pending entries. Leases still held are released, ready now.
var releaseAllScript = redis.NewScript(`
for _, id in ipairs(ARGV) do
	local cur = redis.call('HGET', KEYS[1], id)
	if cur then
		local c = string.find(cur, ':', 1, true)
		if c > 1 then
			redis.call('HSET', KEYS[1], id, string.sub(cur, c))
			redis.call('ZREM', KEYS[2], id)
			redis.call('ZADD', KEYS[3], 0, id)
		end
	end
end
return 0
`)

// Push appends entries atomically: all or none. With Options.MaxSize it
// returns storage.ErrQueueFull when they do not all fit.
func (s *Store) Push(ctx context.Context, data ...[]byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.pushParts(ctx, data)
	}
	if len(data) == 0 {
		return nil
	}
	args := make([]any, 0, len(data)+2)
	args = append(args, group, s.maxSize)
	for _, d := range data {
		args = append(args, d)
	}
	ok, err := pushScript.Run(ctx, s.rdb, []string{s.key("queue"), s.key("lastid"), s.key("hq:e")}, args...).Int()
	if err != nil {
		return s.wrap("push", err)
	}
	if ok == 0 {
		return fmt.Errorf("redisstore: push %d entries: %w", len(data), storage.ErrQueueFull)
	}
	return nil
}

// Lease hands out up to n ready entries for ttl (rounded up to a
// millisecond), in push order, ignoring hosts and priorities: entries
// whose lease expired (taken over) or whose release time came, then new
// ones. It returns storage.ErrQueueEmpty when none is ready. Entry.Host
// and Entry.Priority are those given to PushHosted ("" and 0 for Push).
func (s *Store) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 || ttl <= 0 {
		return nil, fmt.Errorf("redisstore: lease(%d, %v): %w", n, ttl, ErrInvalidArgument)
	}
	if s.parts != nil {
		return s.leaseParts(ctx, n, ttl)
	}
	entries, err := s.lease(ctx, n, ttl)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	return entries, nil
}

// lease runs hqLeaseScript on s's keys.
func (s *Store) lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	token := newToken()
	args := append(s.hqArgs(5), n, ttlMillis(ttl), token, s.consumer, "0")
	res, err := hqLeaseScript.Run(ctx, s.rdb, s.hqKeys(), args...).Slice()
	if err != nil {
		return nil, s.wrap("lease", err)
	}
	entries, err := leaseRows(res, token)
	if err != nil {
		return nil, err
	}
	// IDs grow with push time: sorting by them gives push order across
	// taken-over and new entries.
	slices.SortStableFunc(entries, func(a, b storage.Entry) int { return comparePushOrder(a.ID, b.ID) })
	return entries, nil
}

// peekLease runs hqLeaseScript on s's keys without leasing: the IDs of
// the entries it would give, oldest first.
func (s *Store) peekLease(ctx context.Context, n int) ([]entryKey, error) {
	args := append(s.hqArgs(5), n, 1, "", s.consumer, "1")
	res, err := hqLeaseScript.Run(ctx, s.rdb, s.hqKeys(), args...).Slice()
	if err != nil {
		return nil, s.wrap("lease", err)
	}
	keys := make([]entryKey, 0, len(res))
	for _, r := range res {
		k, ok := r.([]any)
		if !ok || len(k) != 2 {
			return nil, fmt.Errorf("redisstore: lease: unexpected reply %v", r)
		}
		keys = append(keys, entryKey{ms: asInt(k[0]), seq: asInt(k[1])})
	}
	return keys, nil
}

// newToken returns a lease token: it tells this lease from the entry's
// earlier and later ones.
func newToken() string { return strconv.FormatUint(rand.Uint64(), 36) }

// ttlMillis rounds ttl up to a millisecond.
func ttlMillis(ttl time.Duration) int64 { return (ttl + time.Millisecond - 1).Milliseconds() }

// leaseRows turns the rows of hqLeaseScript and hqLeaseHostsScript into
// entries whose IDs carry token, with their hosts' ready times.
func leaseRows(res []any, token string) ([]storage.Entry, error) {
	out := make([]storage.Entry, 0, len(res))
	for _, r := range res {
		row, ok := r.([]any)
		if !ok || len(row) != 7 {
			return nil, fmt.Errorf("redisstore: lease: unexpected reply %v", r)
		}
		kind, _ := row[0].(string)
		id, _ := row[1].(string)
		data, _ := row[2].(string)
		deliveries, _ := row[3].(int64)
		host, _ := row[4].(string)
		prio, _ := row[5].(int64)
		if kind == "h" {
			id = "h" + id
		}
		e := storage.Entry{ID: id + ":" + token, Data: []byte(data), Deliveries: int(deliveries), Host: host, Priority: int(prio)}
		if ms, ok := millisField(row[6]); ok {
			e.HostReady = time.UnixMilli(ms)
		}
		out = append(out, e)
	}
	return out, nil
}

// comparePushOrder compares two lease IDs (of one partition, or without
// it) by their entries' IDs, which is push order.
func comparePushOrder(a, b string) int {
	sa, _, _ := parseLeaseID(a)
	sb, _, _ := parseLeaseID(b)
	ams, aseq := parseStreamID(strings.TrimPrefix(sa, "h"))
	bms, bseq := parseStreamID(strings.TrimPrefix(sb, "h"))
	return cmp.Or(cmp.Compare(ams, bms), cmp.Compare(aseq, bseq))
}

// Ack removes leased entries for good, atomically. IDs whose lease is no
// longer held are skipped and reported in an error wrapping
// storage.ErrUnknownLease; the others are acknowledged all the same. An
// expired lease not yet taken over can still be acknowledged. An
// acknowledgement frees a slot of the entry's host (see LeaseHosts).
func (s *Store) Ack(ctx context.Context, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.ackParts(ctx, ids, nil)
	}
	if len(ids) == 0 {
		return nil
	}
	args, unknown := leasePairs(ids, group)
	var err error
	if anyHosted(args, 1) {
		unknown, err = s.ackHosted(ctx, args[1:], nil, unknown)
	} else {
		unknown, err = s.runPairs(ctx, "ack", ackScript,
			[]string{s.key("queue"), s.key("leases"), s.key("expiry"), s.key("delayed")}, args, 1, unknown)
	}
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: ack %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// anyHosted reports whether the ID/token pairs in args (after head) hold
// a hosted entry's lease, which the stream's scripts do not know.
func anyHosted(args []any, head int) bool {
	for i := head; i < len(args); i += 2 {
		if id, _ := args[i].(string); strings.HasPrefix(id, "h") {
			return true
		}
	}
	return false
}

// Release returns a leased entry to the queue, ready at notBefore (the zero
// time: at once), in its place in push order (and in its host's order).
// The delay is measured on the server's clock from now, so clock skew
// between hosts does not matter. It returns storage.ErrUnknownLease when
// the lease is no longer held.
func (s *Store) Release(ctx context.Context, id string, notBefore time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.releaseParts(ctx, id, notBefore)
	}
	sid, tok, ok := parseLeaseID(id)
	if !ok {
		return fmt.Errorf("redisstore: release %q: %w", id, storage.ErrUnknownLease)
	}
	if strings.HasPrefix(sid, "h") {
		return s.ReleaseBatch(ctx, notBefore, id)
	}
	done, err := releaseScript.Run(ctx, s.rdb,
		[]string{s.key("leases"), s.key("expiry"), s.key("delayed")}, sid, tok, delayMillis(notBefore)).Int()
	if err != nil {
		return s.wrap("release", err)
	}
	if done == 0 {
		return fmt.Errorf("redisstore: release %q: %w", id, storage.ErrUnknownLease)
	}
	return nil
}

// delayMillis is how long from now notBefore is, rounded up to a
// millisecond; 0 for the zero time or a time past.
func delayMillis(notBefore time.Time) int64 {
	if notBefore.IsZero() {
		return 0
	}
	if d := time.Until(notBefore); d > 0 {
		return (d + time.Millisecond - 1).Milliseconds()
	}
	return 0
}

// Len counts entries as of the server's now: expired leases and due
// delayed entries count as ready, whatever their hosts' ready times.
func (s *Store) Len(ctx context.Context) (storage.QueueLen, error) {
	if err := s.check(); err != nil {
		return storage.QueueLen{}, err
	}
	if s.parts != nil {
		return s.lenParts(ctx)
	}
	v, err := hqLenScript.Run(ctx, s.rdb, s.hqKeys(), s.hqArgs(0)...).Int64Slice()
	if err != nil {
		return storage.QueueLen{}, s.wrap("len", err)
	}
	if len(v) != 3 {
		return storage.QueueLen{}, fmt.Errorf("redisstore: len: unexpected reply %v", v)
	}
	return storage.QueueLen{Ready: int(v[0]), Delayed: int(v[1]), Leased: int(v[2])}, nil
}

// parseLeaseID splits "<stream ID>:<token>", or "h<entry ID>:<token>" for
// a hosted entry (see hostqueue_lua.go), keeping the "h".
func parseLeaseID(id string) (entryID, token string, ok bool) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	entryID, token = id[:i], id[i+1:]
	if rest, hosted := strings.CutPrefix(entryID, "h"); hosted {
		if ms, _ := parseStreamID(rest); ms == 0 {
			return "", "", false
		}
		return entryID, token, true
	}
	if ms, _ := parseStreamID(entryID); ms == 0 && !strings.HasPrefix(entryID, "0-") {
		return "", "", false
	}
	return entryID, token, true
}

// parseStreamID splits "<ms>-<seq>"; a malformed ID gives zeros.
func parseStreamID(id string) (ms, seq uint64) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return ms, seq
}

// ReleaseUnheld implements storage.LeaseReclaimer: it releases, ready now,
// every entry leased to this Store's consumer (the stream's pending list,
// and the set of its hosted leases) except the leases in held. A queue run
// calls it after a Lease whose reply an outage lost, so that the entries
// the server granted are not stuck until their lease expires.
func (s *Store) ReleaseUnheld(ctx context.Context, held []string) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.releaseUnheldParts(ctx, held)
	}
	keep := make(map[string]bool, len(held))
	for _, id := range held {
		if sid, _, ok := parseLeaseID(id); ok {
			keep[sid] = true
		}
	}
	pend, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: s.key("queue"), Group: group, Consumer: s.consumer, Start: "-", End: "+", Count: 100000,
	}).Result()
	if err != nil {
		// NOGROUP: no stream, nothing of it pending, unless the server
		// lost the crawl (an error then).
		if err := s.pendingError(ctx, "release unheld", err); err != nil {
			return err
		}
	}
	var ids []any
	for _, p := range pend {
		if !keep[p.ID] {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) > 0 {
		if err := releaseAllScript.Run(ctx, s.rdb, []string{s.key("leases"), s.key("expiry"), s.key("delayed")}, ids...).Err(); err != nil {
			return s.wrap("release unheld", err)
		}
	}
	return s.wrap("release unheld", s.releaseHosted(ctx, keep))
}

var _ storage.LeaseReclaimer = (*Store)(nil)

// renewScript: KEYS leases, expiry; ARGV ttl ms, then ID/token pairs.
// Returns the 0-based indexes of pairs whose lease is not held. A held
// lease whose deadline passed is renewed: nobody has taken it over.
var renewScript = redis.NewScript(luaPrelude + `
local deadline = nowms() + tonumber(ARGV[1])
local unknown = {}
for i = 2, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local cur = redis.call('HGET', KEYS[1], id)
	if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
		redis.call('ZADD', KEYS[2], deadline, id)
	else
		unknown[#unknown + 1] = (i - 2) / 2
	end
end
return unknown
`)

// releaseManyScript: KEYS leases, expiry, delayed; ARGV delay ms, then
// ID/token pairs. Returns the 0-based indexes of pairs whose lease is not
// held. Each entry is released as releaseScript does.
var releaseManyScript = redis.NewScript(luaPrelude + `
local at = nowms() + tonumber(ARGV[1])
local unknown = {}
for i = 2, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local cur = redis.call('HGET', KEYS[1], id)
	local c = cur and string.find(cur, ':', 1, true)
	if c and tok ~= '' and string.sub(cur, 1, c - 1) == tok then
		redis.call('HSET', KEYS[1], id, string.sub(cur, c))
		redis.call('ZREM', KEYS[2], id)
		redis.call('ZADD', KEYS[3], at, id)
	else
		unknown[#unknown + 1] = (i - 2) / 2
	end
end
return unknown
`)

// pushUnvisitedScript: KEYS queue, lastid, hosted entries, then the
// visited set of each entry; ARGV group, maxSize, then member/data pairs in
// the order of KEYS[4:]. Returns {full, pushed...}: full is 1 when the
// unvisited entries would not fit (nothing is pushed), and pushed[i] is 1
// for each entry pushed.
var pushUnvisitedScript = redis.NewScript(luaPrelude + plainAdd + `
ensure(KEYS[1], ARGV[1])
local out = {0}
local datas = {}
for i = 4, #KEYS do
	local m = ARGV[3 + (i - 4) * 2]
	if redis.call('SISMEMBER', KEYS[i], m) == 1 then
		out[i - 2] = 0
	else
		out[i - 2] = 1
		datas[#datas + 1] = ARGV[4 + (i - 4) * 2]
	end
end
local max = tonumber(ARGV[2])
if #datas > 0 and max > 0 and redis.call('XLEN', KEYS[1]) + redis.call('HLEN', KEYS[3]) + #datas > max then
	out[1] = 1
	return out
end
plainAdd(KEYS[1], KEYS[2], datas)
return out
`)

// leasePairs splits lease IDs into script arguments (after head) and the
// IDs that are malformed.
func leasePairs(ids []string, head ...any) (args []any, bad []string) {
	args = append(make([]any, 0, len(head)+2*len(ids)), head...)
	for _, id := range ids {
		sid, tok, ok := parseLeaseID(id)
		if !ok {
			bad = append(bad, id)
			continue
		}
		args = append(args, sid, tok)
	}
	return args, bad
}

// runPairs runs a script over lease ID pairs and adds the IDs it reports
// not held to unknown.
func (s *Store) runPairs(ctx context.Context, op string, script *redis.Script, keys []string, args []any, head int, unknown []string) ([]string, error) {
	if len(args) == head {
		return unknown, nil
	}
	bad, err := script.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, s.wrap(op, err)
	}
	for _, i := range bad {
		unknown = append(unknown, fmt.Sprintf("%s:%s", args[head+2*int(i)], args[head+1+2*int(i)]))
	}
	return unknown, nil
}

// Renew implements storage.LeaseRenewer in one script: each held lease runs
// ttl (rounded up to a millisecond) from now on the server's clock.
func (s *Store) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("redisstore: renew(%v): %w", ttl, ErrInvalidArgument)
	}
	if s.parts != nil {
		return s.renewParts(ctx, ttl, ids)
	}
	if len(ids) == 0 {
		return nil
	}
	var err error
	args, unknown := leasePairs(ids, ttlMillis(ttl))
	if anyHosted(args, 1) {
		unknown, err = s.runPairs(ctx, "renew", hqRenewScript, s.hqKeys(), append(s.hqArgs(len(args)), args...), 5, unknown)
	} else {
		unknown, err = s.runPairs(ctx, "renew", renewScript, []string{s.key("leases"), s.key("expiry")}, args, 1, unknown)
	}
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: renew %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// ReleaseBatch implements storage.BatchReleaser in one script; each entry
// keeps its place in push order (and in its host's order), ready at
// notBefore, and frees a slot of its host.
func (s *Store) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.parts != nil {
		return s.releaseBatchParts(ctx, notBefore, ids)
	}
	if len(ids) == 0 {
		return nil
	}
	var err error
	delayMs := delayMillis(notBefore)
	args, unknown := leasePairs(ids, delayMs)
	if anyHosted(args, 1) {
		// The caller's not-before is kept for Head, to the millisecond.
		nb := ""
		if delayMs > 0 {
			nb = strconv.FormatInt(notBefore.UnixMilli(), 10)
		}
		head := append(s.hqArgs(len(args)+1), delayMs, nb)
		unknown, err = s.runPairs(ctx, "release", hqReleaseScript, s.hqKeys(), append(head, args[1:]...), 6, unknown)
	} else {
		unknown, err = s.runPairs(ctx, "release", releaseManyScript,
			[]string{s.key("leases"), s.key("expiry"), s.key("delayed")}, args, 1, unknown)
	}
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: release %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// PushUnvisited implements storage.VisitedPusher in one script: the keys
// are looked up in the visited set and the entries whose keys are absent
// are appended, atomically. With Options.MaxSize it returns
// storage.ErrQueueFull, pushing nothing, when those do not all fit.
func (s *Store) PushUnvisited(ctx context.Context, keys []uint64, data [][]byte) ([]bool, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(keys) != len(data) {
		return nil, fmt.Errorf("redisstore: push unvisited: %w: %d keys, %d entries", storage.ErrLengthMismatch, len(keys), len(data))
	}
	if s.ttl > 0 {
		return s.pushUnvisitedTTL(ctx, keys, data)
	}
	if s.parts != nil {
		return s.pushUnvisitedParts(ctx, keys, data)
	}
	pushed := make([]bool, len(data))
	if len(data) == 0 {
		return pushed, nil
	}
	rkeys := make([]string, 0, len(keys)+3)
	rkeys = append(rkeys, s.key("queue"), s.key("lastid"), s.key("hq:e"))
	args := make([]any, 0, 2+2*len(keys))
	args = append(args, group, s.maxSize)
	for i, k := range keys {
		rkeys = append(rkeys, s.visitedKey(k))
		args = append(args, member(k), data[i])
	}
	res, err := pushUnvisitedScript.Run(ctx, s.rdb, rkeys, args...).Int64Slice()
	if err != nil {
		return nil, s.wrap("push unvisited", err)
	}
	if len(res) != len(data)+1 {
		return nil, fmt.Errorf("redisstore: push unvisited: unexpected reply %v", res)
	}
	if res[0] == 1 {
		return nil, fmt.Errorf("redisstore: push unvisited %d entries: %w", len(data), storage.ErrQueueFull)
	}
	for i := range pushed {
		pushed[i] = res[i+1] == 1
	}
	return pushed, nil
}

var (
	_ storage.LeaseRenewer  = (*Store)(nil)
	_ storage.BatchReleaser = (*Store)(nil)
	_ storage.VisitedPusher = (*Store)(nil)
)
