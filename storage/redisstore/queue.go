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

// pushScript: KEYS queue; ARGV group, maxSize, data...
var pushScript = redis.NewScript(luaPrelude + `
ensure(KEYS[1], ARGV[1])
local max = tonumber(ARGV[2])
if max > 0 and redis.call('XLEN', KEYS[1]) + #ARGV - 2 > max then
	return 0
end
for i = 3, #ARGV do
	redis.call('XADD', KEYS[1], '*', 'd', ARGV[i])
end
return 1
`)

// leaseScript: KEYS queue, leases, expiry, delayed; ARGV group, consumer,
// n, ttl ms, token. Returns {stream ID, data, deliveries} triples.
//
// Entries already delivered once (in the group's pending list) are older
// than any new entry, so the ready ones among them (expired leases, due
// releases) go first, lowest stream ID first; new entries fill the rest.
var leaseScript = redis.NewScript(luaPrelude + `
local now = nowms()
local n = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local tok = ARGV[5]
ensure(KEYS[1], ARGV[1])
local cands = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 1000)) do
	cands[#cands + 1] = id
end
local function idparts(id)
	local d = string.find(id, '-', 1, true)
	return tonumber(string.sub(id, 1, d - 1)), tonumber(string.sub(id, d + 1))
end
table.sort(cands, function(a, b)
	local am, as = idparts(a)
	local bm, bs = idparts(b)
	if am ~= bm then return am < bm end
	return as < bs
end)
local out = {}
local function grant(id, data, deliveries)
	redis.call('HSET', KEYS[2], id, tok .. ':' .. deliveries)
	redis.call('ZADD', KEYS[3], now + ttl, id)
	out[#out + 1] = {id, data, deliveries}
end
for _, id in ipairs(cands) do
	if #out >= n then break end
	local prev = redis.call('HGET', KEYS[2], id)
	redis.call('ZREM', KEYS[3], id)
	redis.call('ZREM', KEYS[4], id)
	local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id)
	local e = claimed[1]
	if e and e[2] then
		local d = 0
		if prev then d = tonumber(string.sub(prev, string.find(prev, ':', 1, true) + 1)) end
		grant(id, field(e[2], 'd'), d + 1)
	else
		redis.call('HDEL', KEYS[2], id)
	end
end
if #out < n then
	local res = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', n - #out, 'STREAMS', KEYS[1], '>')
	if res then
		for _, e in ipairs(res[1][2]) do
			grant(e[1], field(e[2], 'd'), 1)
		end
	end
end
return out
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

// lenScript: KEYS queue, expiry, delayed. Returns {ready, delayed, leased}.
var lenScript = redis.NewScript(luaPrelude + `
local now = nowms()
local leased = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
local delayed = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
return {redis.call('XLEN', KEYS[1]) - leased - delayed, delayed, leased}
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
	ok, err := pushScript.Run(ctx, s.rdb, []string{s.key("queue")}, args...).Int()
	if err != nil {
		return s.wrap("push", err)
	}
	if ok == 0 {
		return fmt.Errorf("redisstore: push %d entries: %w", len(data), storage.ErrQueueFull)
	}
	return nil
}

// Lease hands out up to n ready entries for ttl (rounded up to a
// millisecond), in push order: entries whose lease expired (taken over with
// XCLAIM) or whose release time came, then new ones (XREADGROUP). It returns storage.ErrQueueEmpty when none is ready.
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
	token := strconv.FormatUint(rand.Uint64(), 36)
	ttlMs := (ttl + time.Millisecond - 1).Milliseconds()
	res, err := leaseScript.Run(ctx, s.rdb,
		[]string{s.key("queue"), s.key("leases"), s.key("expiry"), s.key("delayed")},
		group, s.consumer, n, ttlMs, token).Slice()
	if err != nil {
		return nil, s.wrap("lease", err)
	}
	if len(res) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	type leased struct {
		ms, seq uint64
		e       storage.Entry
	}
	out := make([]leased, 0, len(res))
	for _, r := range res {
		triple, ok := r.([]any)
		if !ok || len(triple) != 3 {
			return nil, fmt.Errorf("redisstore: lease: unexpected reply %v", r)
		}
		id, _ := triple[0].(string)
		data, _ := triple[1].(string)
		deliveries, _ := triple[2].(int64)
		ms, seq := parseStreamID(id)
		out = append(out, leased{ms, seq, storage.Entry{ID: id + ":" + token, Data: []byte(data), Deliveries: int(deliveries)}})
	}
	// Stream IDs grow with push (or re-queue) time: sorting by them gives
	// push order across taken-over and new entries.
	slices.SortFunc(out, func(a, b leased) int {
		return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.seq, b.seq))
	})
	entries := make([]storage.Entry, len(out))
	for i, l := range out {
		entries[i] = l.e
	}
	return entries, nil
}

// Ack removes leased entries for good (XACK and XDEL), atomically. IDs
// whose lease is no longer held are skipped and reported in an error
// wrapping storage.ErrUnknownLease; the others are acknowledged all the
// same. An expired lease not yet taken over can still be acknowledged.
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
	var unknown []string
	args := []any{group}
	for _, id := range ids {
		sid, tok, ok := parseLeaseID(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		args = append(args, sid, tok)
	}
	if len(args) > 1 {
		bad, err := ackScript.Run(ctx, s.rdb, []string{s.key("queue"), s.key("leases"), s.key("expiry"), s.key("delayed")}, args...).Int64Slice()
		if err != nil {
			return s.wrap("ack", err)
		}
		for _, i := range bad {
			unknown = append(unknown, fmt.Sprintf("%s:%s", args[1+2*i], args[2+2*i]))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: ack %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// Release returns a leased entry to the queue, ready at notBefore (the zero
// time: at once), in its place in push order. The delay is measured on the
// server's clock from now, so clock skew between hosts does not matter. It
// returns storage.ErrUnknownLease when the lease is no longer held.
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
	var delayMs int64
	if !notBefore.IsZero() {
		if d := time.Until(notBefore); d > 0 {
			delayMs = (d + time.Millisecond - 1).Milliseconds()
		}
	}
	done, err := releaseScript.Run(ctx, s.rdb,
		[]string{s.key("leases"), s.key("expiry"), s.key("delayed")}, sid, tok, delayMs).Int()
	if err != nil {
		return s.wrap("release", err)
	}
	if done == 0 {
		return fmt.Errorf("redisstore: release %q: %w", id, storage.ErrUnknownLease)
	}
	return nil
}

// Len counts entries as of the server's now: expired leases and due
// delayed entries count as ready.
func (s *Store) Len(ctx context.Context) (storage.QueueLen, error) {
	if err := s.check(); err != nil {
		return storage.QueueLen{}, err
	}
	if s.parts != nil {
		return s.lenParts(ctx)
	}
	v, err := lenScript.Run(ctx, s.rdb, []string{s.key("queue"), s.key("expiry"), s.key("delayed")}).Int64Slice()
	if err != nil {
		return storage.QueueLen{}, s.wrap("len", err)
	}
	if len(v) != 3 {
		return storage.QueueLen{}, fmt.Errorf("redisstore: len: unexpected reply %v", v)
	}
	return storage.QueueLen{Ready: int(v[0]), Delayed: int(v[1]), Leased: int(v[2])}, nil
}

// parseLeaseID splits "<stream ID>:<token>".
func parseLeaseID(id string) (streamID, token string, ok bool) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	streamID, token = id[:i], id[i+1:]
	if ms, _ := parseStreamID(streamID); ms == 0 && !strings.HasPrefix(streamID, "0-") {
		return "", "", false
	}
	return streamID, token, true
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
// every entry of the stream pending for this Store's consumer except the
// leases in held. A queue run calls it after a Lease whose reply an outage
// lost, so that the entries the server granted are not stuck until their
// lease expires.
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
		return s.pendingError(ctx, "release unheld", err)
	}
	var ids []any
	for _, p := range pend {
		if !keep[p.ID] {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := releaseAllScript.Run(ctx, s.rdb, []string{s.key("leases"), s.key("expiry"), s.key("delayed")}, ids...).Err(); err != nil {
		return s.wrap("release unheld", err)
	}
	return nil
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

// pushUnvisitedScript: KEYS queue, then the visited set of each entry; ARGV
// group, maxSize, then member/data pairs in the order of KEYS[2:]. Returns
// {full, pushed...}: full is 1 when the unvisited entries would not fit
// (nothing is pushed), and pushed[i] is 1 for each entry pushed.
var pushUnvisitedScript = redis.NewScript(luaPrelude + `
ensure(KEYS[1], ARGV[1])
local out = {0}
local n = 0
for i = 2, #KEYS do
	local m = ARGV[3 + (i - 2) * 2]
	if redis.call('SISMEMBER', KEYS[i], m) == 1 then
		out[i] = 0
	else
		out[i] = 1
		n = n + 1
	end
end
local max = tonumber(ARGV[2])
if n > 0 and max > 0 and redis.call('XLEN', KEYS[1]) + n > max then
	out[1] = 1
	return out
end
for i = 2, #KEYS do
	if out[i] == 1 then
		redis.call('XADD', KEYS[1], '*', 'd', ARGV[4 + (i - 2) * 2])
	end
end
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
	ttlMs := (ttl + time.Millisecond - 1).Milliseconds()
	args, unknown := leasePairs(ids, ttlMs)
	unknown, err := s.runPairs(ctx, "renew", renewScript, []string{s.key("leases"), s.key("expiry")}, args, 1, unknown)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("redisstore: renew %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// ReleaseBatch implements storage.BatchReleaser in one script; each entry
// keeps its place in push order, ready at notBefore.
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
	var delayMs int64
	if !notBefore.IsZero() {
		if d := time.Until(notBefore); d > 0 {
			delayMs = (d + time.Millisecond - 1).Milliseconds()
		}
	}
	args, unknown := leasePairs(ids, delayMs)
	unknown, err := s.runPairs(ctx, "release", releaseManyScript,
		[]string{s.key("leases"), s.key("expiry"), s.key("delayed")}, args, 1, unknown)
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
	rkeys := make([]string, 0, len(keys)+1)
	rkeys = append(rkeys, s.key("queue"))
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
