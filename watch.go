package magpie

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a person watching a crawl reads beyond Stats (the dashboard package
// shows it): the latest failures with the page that linked to each, and
// each host's done, failed and mean latency. Both are kept at the doors
// every request passes anyway (the end of its fetch, OnError), for a few
// atomic adds or one short lock each, whether anybody watches or not.

// maxRecentFailures is how many failures RecentFailures keeps.
const maxRecentFailures = 100

// maxWatchedHosts bounds the hosts whose totals are kept (HostReports): a
// broad crawl of millions of hosts keeps the first ones met.
const maxWatchedHosts = 10_000

// Failure kinds (Failure.Kind, Stats.Failed).
const (
	FailHTTP       = "http"       // an HTTP error status (4xx, 5xx)
	FailTimeout    = "timeout"    // a request or read that timed out
	FailDNS        = "dns"        // a host name that did not resolve
	FailConnection = "connection" // a connection refused, reset or closed
	FailTLS        = "tls"        // a TLS handshake or certificate failure
	FailRedirects  = "redirects"  // too many redirects, or a refused one
	FailCancelled  = "cancelled"  // the crawl stopped under it
	FailOther      = "other"      // anything else (a callback's error, a body cut short)
)

// Failure is one request that failed (reached OnError), as RecentFailures
// lists it. URLs have their password redacted, as in the logs.
type Failure struct {
	Time   time.Time `json:"time"`
	URL    string    `json:"url"`
	Method string    `json:"method"`
	Host   string    `json:"host"`
	// Status is the HTTP status, 0 when no response came.
	Status int `json:"status"`
	// Kind is one of the Fail* constants.
	Kind  string `json:"kind"`
	Error string `json:"error"`
	// Referrer is the page the request was found on (Request.ParentURL),
	// "" for a start URL.
	Referrer string `json:"referrer"`
}

// failureRing keeps the latest failures and counts all of them by kind.
type failureRing struct {
	// mu guards every field below.
	mu    sync.Mutex
	ring  [maxRecentFailures]Failure
	total int // failures ever recorded; the next goes to ring[total%len]
	kinds map[string]uint64
}

// hostTotals are one host's counts, updated with atomics.
type hostTotals struct {
	done, failed atomic.Uint64
	// latency sums the latency of the responses counted in timed.
	latency, timed atomic.Int64
}

// watchState is the collector's record for watchers.
type watchState struct {
	failures failureRing
	// hosts maps a host (URL.Host) to its *hostTotals; nhosts counts them,
	// up to maxWatchedHosts.
	hosts  sync.Map
	nhosts atomic.Int32
}

// host returns host's totals, nil when maxWatchedHosts are kept already.
func (w *watchState) host(host string) *hostTotals {
	if v, ok := w.hosts.Load(host); ok {
		return v.(*hostTotals)
	}
	if w.nhosts.Load() >= maxWatchedHosts {
		return nil
	}
	v, loaded := w.hosts.LoadOrStore(host, &hostTotals{})
	if !loaded {
		w.nhosts.Add(1)
	}
	return v.(*hostTotals)
}

// fetched counts a fetch of host that got a response (status != 0), and
// its latency.
func (w *watchState) fetched(host string, status int, latency time.Duration) {
	if status == 0 {
		return
	}
	t := w.host(host)
	if t == nil {
		return
	}
	t.done.Add(1)
	if latency > 0 {
		t.latency.Add(int64(latency))
		t.timed.Add(1)
	}
}

// failed records a failure delivered to OnError.
func (w *watchState) failed(resp *Response, err error) {
	req := resp.Request
	if req == nil || req.URL == nil || err == nil {
		return
	}
	f := Failure{Time: time.Now(), URL: req.URL.Redacted(), Method: req.Method, Host: req.URL.Host,
		Status: resp.StatusCode, Kind: failureKind(err), Error: redactError(err.Error(), req.URL),
		Referrer: redactURLString(req.ParentURL())}
	if t := w.host(f.Host); t != nil {
		t.failed.Add(1)
	}
	r := &w.failures
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.total%len(r.ring)] = f
	r.total++
	if r.kinds == nil {
		r.kinds = map[string]uint64{}
	}
	r.kinds[f.Kind]++
}

// kindCounts returns the failures counted by kind.
func (r *failureRing) kindCounts() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]uint64, len(r.kinds))
	for k, v := range r.kinds {
		m[k] = v
	}
	return m
}

// RecentFailures returns the latest failures of the collector's crawls
// (requests that reached OnError), the newest first, at most the last 100.
// Safe for concurrent use; it copies, so the caller may keep the slice.
func (c *Collector) RecentFailures() []Failure {
	r := &c.watch.failures
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.total, len(r.ring))
	out := make([]Failure, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.ring[(r.total-i)%len(r.ring)])
	}
	return out
}

// failureKind names what made a request fail (a Fail* constant).
func failureKind(err error) string {
	if _, ok := errors.AsType[*HTTPError](err); ok {
		return FailHTTP
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, ErrStopped):
		return FailCancelled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	case errors.Is(err, ErrTooManyRedirects), errors.Is(err, ErrHostBlocked):
		return FailRedirects
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return FailDNS
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return FailTLS
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return FailTLS
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return FailConnection
	}
	return FailOther
}

// redactURLString returns s, a URL, with its password redacted.
func redactURLString(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

// redactError replaces u, with its password, in an error's text (a
// *url.Error prints the URL it was given) by its redacted form.
func redactError(msg string, u *url.URL) string {
	if u.User == nil {
		return msg
	}
	if _, has := u.User.Password(); !has {
		return msg
	}
	return strings.ReplaceAll(msg, u.String(), u.Redacted())
}

// Robots.txt states of a host (HostReport.Robots).
const (
	RobotsIgnored     = "ignored"     // IgnoreRobotsTxt
	RobotsUnknown     = "unknown"     // not fetched yet
	RobotsFetching    = "fetching"    // being fetched
	RobotsOK          = "ok"          // fetched and fresh
	RobotsUnreachable = "unreachable" // could not be fetched; its URLs wait or are refused
)

// HostReport is one host's line of a watcher's table (HostReports).
type HostReport struct {
	// Host is the host and port, as in the request URLs.
	Host string `json:"host"`
	// Queued is how many requests wait for the host: in the in-memory
	// frontier and in the politeness gate; a queue run counts only the
	// gate's (its queue is not counted by host).
	Queued int `json:"queued"`
	// InFlight is how many of its requests are being fetched.
	InFlight int `json:"in_flight"`
	// Done counts responses received from it, Failed its requests that
	// reached OnError.
	Done   uint64 `json:"done"`
	Failed uint64 `json:"failed"`
	// MeanLatency is the mean time to its responses' headers.
	MeanLatency time.Duration `json:"mean_latency_ns"`
	// WaitUntil is when the host may start its next request, when that is
	// in the future: its Delay (WaitReason "delay") or a Retry-After or
	// back-off ("retry-after").
	WaitUntil  time.Time `json:"wait_until,omitzero"`
	WaitReason string    `json:"wait_reason,omitempty"`
	// Robots is its robots.txt state, one of the Robots* constants.
	Robots string `json:"robots"`
}

// HostReports returns up to n hosts of the collector's crawls (n <= 0:
// all those kept, at most 10,000), the slowest first: by mean latency,
// then by the later wait. A host appears once it has a response, a
// failure, or requests waiting or in flight in the current crawl. Safe for
// concurrent use; it costs a walk of the hosts, so call it when somebody
// looks, not per request.
func (c *Collector) HostReports(n int) []HostReport {
	byHost := map[string]*HostReport{}
	get := func(h string) *HostReport {
		r := byHost[h]
		if r == nil {
			r = &HostReport{Host: h}
			byHost[h] = r
		}
		return r
	}
	c.watch.hosts.Range(func(k, v any) bool {
		t, r := v.(*hostTotals), get(k.(string))
		r.Done, r.Failed = t.done.Load(), t.failed.Load()
		if n := t.timed.Load(); n > 0 {
			r.MeanLatency = time.Duration(t.latency.Load() / n)
		}
		return true
	})
	c.runMu.Lock()
	run := c.run
	c.runMu.Unlock()
	now := time.Now()
	if run != nil {
		for _, hs := range run.gate.HostStats(0) {
			r := get(hs.Host)
			r.InFlight, r.Queued = hs.InFlight, hs.Waiting
			if hs.Until.After(now) {
				r.WaitUntil, r.WaitReason = hs.Until, "delay"
				if hs.Held {
					r.WaitReason = "retry-after"
				}
			}
		}
		if mf, ok := run.front.(*memFrontier); ok {
			for h, q := range mf.queuedByHost() {
				get(h).Queued += q
			}
		}
	}
	out := make([]HostReport, 0, len(byHost))
	ignore := c.config().ignoreRobots
	for _, r := range byHost {
		r.Robots = RobotsIgnored
		if !ignore {
			r.Robots = c.shared.robots.state(r.Host)
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b HostReport) int {
		if c := cmp.Compare(b.MeanLatency, a.MeanLatency); c != 0 {
			return c
		}
		if c := b.WaitUntil.Compare(a.WaitUntil); c != 0 {
			return c
		}
		return strings.Compare(a.Host, b.Host)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// state is host's robots.txt state (a Robots* constant but
// RobotsIgnored), over https or http, whichever the cache knows.
func (rc *robotsCache) state(host string) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, scheme := range []string{"https", "http"} {
		el, ok := rc.entries[robotsKey(&url.URL{Scheme: scheme, Host: host})]
		if !ok {
			continue
		}
		e := el.Value.(*robotsEntry)
		select {
		case <-e.done:
			if e.err != nil || e.pending || e.down {
				return RobotsUnreachable
			}
			return RobotsOK
		default:
			return RobotsFetching
		}
	}
	return RobotsUnknown
}
