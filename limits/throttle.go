package limits

import (
	"math/rand/v2"
	"time"
)

// Result is what a finished request tells the Gate through Ticket.Done.
type Result struct {
	// StatusCode is the response status, 0 for a transport error.
	StatusCode int
	// Err is the transport error, if any.
	Err error
	// Latency is the time from start to response headers; 0 means "measure
	// from the start to Done".
	Latency time.Duration
	// RetryAfter is the server's Retry-After, 0 if absent. It holds the host
	// for that long (capped by MaxHold), whatever the status.
	RetryAfter time.Duration
}

// backoffBase is the least back-off after a 429/503, so a host with no delay
// still gets a real pause.
const backoffBase = time.Second

// observe updates h from a finished request: AutoThrottle, Retry-After and
// the 429/503 back-off.
func (h *host[T]) observe(res Result, lat time.Duration, c *clock, l *Limiter) {
	code := res.StatusCode
	ok := res.Err == nil && code >= 200 && code < 300
	if e := h.ent; e != nil && e.auto && lat > 0 {
		target := time.Duration(float64(lat) / e.target)
		switch {
		case target > h.adapt:
			// Slow down at once: the server is telling us it is busy.
			h.adapt = target
		case ok:
			// Speed up gradually, halfway each time, so one fast response
			// does not undo the lesson of many slow ones.
			h.adapt = (h.adapt + target) / 2
		}
		h.adapt = min(max(h.adapt, e.delay), e.maxDelay)
		h.learned = true
	}
	if res.RetryAfter > 0 {
		h.holdUntil(c.now().Add(min(res.RetryAfter, l.holdCap())))
	}
	switch {
	case code == 429 || code == 503:
		h.strikes++
		h.holdUntil(c.now().Add(h.backoff(l)))
	case res.Err == nil && code > 0 && code < 500 && h.strikes > 0:
		// Each success pays back one doubling.
		h.strikes--
	}
}

func (h *host[T]) holdUntil(t time.Time) {
	if t.After(h.hold) {
		h.hold = t
	}
}

// backoff is base·2^(strikes-1), capped, with "equal jitter": uniform in
// [b/2, b), so hosts that failed together do not come back together.
func (h *host[T]) backoff(l *Limiter) time.Duration {
	limit := l.backoffCap()
	if h.ent != nil && h.ent.auto {
		limit = max(limit, h.ent.maxDelay)
	}
	b := max(h.delay(), backoffBase)
	for i := 1; i < h.strikes && b < limit; i++ {
		b *= 2
	}
	b = min(b, limit)
	half := b / 2
	if half <= 0 {
		return b
	}
	return half + time.Duration(rand.Int64N(int64(b-half)))
}
