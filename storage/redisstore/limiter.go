package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie/limits"
	"github.com/redis/go-redis/v9"
)

// acquireScript takes a host's next request start for every process at
// once. KEYS: the host's slot set, the host's next-start key. ARGV:
// parallelism (<= 0: no slot), delay in µs, slot TTL in ms, slot token.
// Returns {1, 0} for a start granted, {0, µs} to wait for the delay, {0, -1}
// when every slot is taken.
//
// The delay is kept as the next allowed start in µs on the server's clock
// (not GCRA via redis_rate: with one script the slot and the delay are
// taken together or not at all, and µs keeps a 20 ms delay from being
// rounded down by up to 1 ms). Slots are leased like queue entries (a ZSET
// scored by expiry), so a process that dies holding one loses it after the
// TTL. Numbers are formatted with %.0f because Lua's tostring would write
// a µs timestamp in lossy scientific notation.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
if nxt > now then return {0, nxt - now} end
local par = tonumber(ARGV[1])
if par > 0 then
	local ttl = tonumber(ARGV[3])
	local nowms = math.floor(now / 1000)
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', nowms))
	if redis.call('ZCARD', KEYS[1]) >= par then return {0, -1} end
	redis.call('ZADD', KEYS[1], string.format('%.0f', nowms + ttl), ARGV[4])
	redis.call('PEXPIRE', KEYS[1], ttl)
end
local delay = tonumber(ARGV[2])
if delay > 0 then
	redis.call('SET', KEYS[2], string.format('%.0f', now + delay), 'PX', math.floor(delay / 1000) + 1)
end
return {1, now}
`)

// errBadReply is wrapped when the script answers something it never sends.
var errBadReply = errors.New("unexpected script reply")

// DefaultSlotTTL is how long a parallelism slot survives a process that
// dies without releasing it.
const DefaultSlotTTL = 2 * time.Minute

// DefaultSlotPoll is how long Acquire tells a caller to wait when every
// parallelism slot of a host is taken: other processes' releases are not
// signalled, so the caller asks again after this.
const DefaultSlotPoll = 10 * time.Millisecond

// HostLimiter is politeness shared by every process of a crawl: per host, a
// least gap between request starts and a most requests in flight, both
// kept in Redis and taken together by one script, so they hold across
// processes. It implements limits.Shared: pass it to magpie.SharedLimits
// (or limits.Limiter.SetShared) in every process. It is safe for
// concurrent use; it uses its Store's client and prefix and needs no Close
// (closing the Store makes it fail with storage.ErrClosed). The zero value
// is not usable: call Store.HostLimiter.
type HostLimiter struct {
	s       *Store
	slotTTL time.Duration
	poll    time.Duration
	onGrant func(host string, at time.Time)
}

// OnGrant sets f to be called after every start the limiter grants, with the
// host and the grant's time on the Redis server's clock (the clock every
// process's grants are spaced on), for metrics and tests. Set it before the
// limiter is used; nil turns it off.
func (h *HostLimiter) OnGrant(f func(host string, at time.Time)) { h.onGrant = f }

var _ limits.Shared = (*HostLimiter)(nil)

// HostLimiter returns the crawl's shared host limiter. slotTTL <= 0 means
// DefaultSlotTTL; it must exceed the longest request, or a slot comes back
// while its request still runs.
func (s *Store) HostLimiter(slotTTL time.Duration) *HostLimiter {
	if slotTTL <= 0 {
		slotTTL = DefaultSlotTTL
	}
	return &HostLimiter{s: s, slotTTL: slotTTL, poll: DefaultSlotPoll}
}

// Acquire implements limits.Shared without blocking beyond one round trip:
// if host's delay since the last start (by any process) has passed and it
// has fewer than parallelism requests in flight (parallelism <= 0: no
// limit), it takes a slot, moves the next start to now+delay (delay <= 0:
// none) and returns a release to call when the request ends; else it
// returns how long to wait before asking again. release frees the slot even
// after ctx has ended (it has its own 5 s timeout); if it cannot, the slot
// expires after the slot TTL. Times are the Redis server's, so the
// processes' clocks need not agree.
func (h *HostLimiter) Acquire(ctx context.Context, host string, delay time.Duration, parallelism int) (release func(), wait time.Duration, err error) {
	if err := h.s.check(); err != nil {
		return nil, 0, err
	}
	var token string
	if parallelism > 0 {
		token = strconv.FormatUint(rand.Uint64(), 36)
	}
	// The host is the keys' hash tag: in a cluster both are in one slot,
	// so the script may take them together.
	slots := h.s.prefix + ":slots:{" + host + "}"
	res, err := acquireScript.Run(ctx, h.s.rdb, []string{slots, h.s.prefix + ":next:{" + host + "}"},
		max(parallelism, 0), max(delay.Microseconds(), 0), h.slotTTL.Milliseconds(), token).Int64Slice()
	if err != nil {
		return nil, 0, h.s.wrap("host limiter acquire", err)
	}
	if len(res) != 2 {
		return nil, 0, h.s.wrap("host limiter acquire", errBadReply)
	}
	if res[0] == 1 && h.onGrant != nil {
		h.onGrant(host, time.UnixMicro(res[1]))
	}
	switch {
	case res[0] == 1 && parallelism <= 0:
		return func() {}, 0, nil
	case res[0] == 1:
		return func() {
			// A fresh context: the slot must be freed even when the
			// request's context has ended. If this fails the slot expires.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = h.s.rdb.ZRem(ctx, slots, token).Err()
		}, 0, nil
	case res[1] < 0:
		return nil, h.poll, nil
	default:
		return nil, max(time.Duration(res[1])*time.Microsecond, time.Microsecond), nil
	}
}

// Allow takes host's next start under delay alone, with no parallelism
// limit: it returns 0 when the request may start now, else how long to wait
// before asking again. delay <= 0 always allows. It shares its state with
// Acquire.
func (h *HostLimiter) Allow(ctx context.Context, host string, delay time.Duration) (time.Duration, error) {
	if delay <= 0 {
		return 0, h.s.check()
	}
	_, wait, err := h.Acquire(ctx, host, delay, 0)
	return wait, err
}
