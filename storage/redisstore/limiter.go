package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// slotScript: KEYS the host's slot set; ARGV parallelism, slot TTL ms,
// token. Slots are leased like queue entries (a ZSET scored by expiry on the
// server's clock), so a process that dies holding one loses it after the
// TTL. Returns 1 when a slot was taken.
var slotScript = redis.NewScript(luaPrelude + `
local now = nowms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
`)

// DefaultSlotTTL is how long a parallelism slot survives a process that
// dies without releasing it.
const DefaultSlotTTL = 2 * time.Minute

// HostLimiter is politeness shared by every process of a crawl: per host, a
// minimum delay between request starts (GCRA, via redis_rate) and a maximum
// number of requests in flight (leased slots). It is safe for concurrent
// use; it uses its Store's client and prefix and needs no Close. The zero
// value is not usable: call Store.HostLimiter.
//
// These are primitives: the wiring into the limits package (matching
// LimitRules to hosts, RandomDelay) is not done here.
type HostLimiter struct {
	s       *Store
	rate    *redis_rate.Limiter
	slotTTL time.Duration
	// poll is the longest wait between two attempts to take a slot; slots
	// freed by other processes are not signalled.
	poll time.Duration
}

// HostLimiter returns the crawl's shared host limiter. slotTTL <= 0 means
// DefaultSlotTTL; it must exceed the longest request.
func (s *Store) HostLimiter(slotTTL time.Duration) *HostLimiter {
	if slotTTL <= 0 {
		slotTTL = DefaultSlotTTL
	}
	return &HostLimiter{s: s, rate: redis_rate.NewLimiter(s.rdb), slotTTL: slotTTL, poll: 20 * time.Millisecond}
}

// Allow takes host's next start under a delay of one request per delay, if
// it is due: it returns 0 when the request may start now, else how long to
// wait before asking again. delay <= 0 always allows.
func (h *HostLimiter) Allow(ctx context.Context, host string, delay time.Duration) (time.Duration, error) {
	if err := h.s.check(); err != nil {
		return 0, err
	}
	if delay <= 0 {
		return 0, nil
	}
	res, err := h.rate.Allow(ctx, h.s.prefix+":rate:"+host, redis_rate.Limit{Rate: 1, Burst: 1, Period: delay})
	if err != nil {
		return 0, h.s.wrap("host limiter allow", err)
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	return max(res.RetryAfter, time.Millisecond), nil
}

// Acquire waits until host has fewer than parallelism requests in flight
// (across all processes) and its delay since the last start has passed,
// then returns a release function the caller must call when the request
// ends. parallelism <= 0 means no limit on requests in flight. It returns
// ctx's error when ctx ends first.
func (h *HostLimiter) Acquire(ctx context.Context, host string, delay time.Duration, parallelism int) (release func(), err error) {
	if err := h.s.check(); err != nil {
		return nil, err
	}
	release = func() {}
	if parallelism > 0 {
		token := strconv.FormatUint(rand.Uint64(), 36)
		key := h.s.prefix + ":slots:" + host
		for {
			ok, err := slotScript.Run(ctx, h.s.rdb, []string{key}, parallelism, h.slotTTL.Milliseconds(), token).Int()
			if err != nil {
				return nil, h.s.wrap("host limiter acquire", err)
			}
			if ok == 1 {
				break
			}
			if err := wait(ctx, h.poll); err != nil {
				return nil, err
			}
		}
		release = func() {
			// A fresh context: the slot must be freed even when the
			// request's context has ended. If this fails the slot expires.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = h.s.rdb.ZRem(ctx, key, token).Err()
		}
	}
	for {
		d, err := h.Allow(ctx, host, delay)
		if err != nil {
			release()
			return nil, err
		}
		if d == 0 {
			return release, nil
		}
		if err := wait(ctx, d); err != nil {
			release()
			return nil, err
		}
	}
}

// wait blocks for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redisstore: host limiter: %w", ctx.Err())
	}
}
