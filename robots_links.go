package magpie

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/temoto/robotstxt"
)

// A page's links mostly go to one host, whose robots.txt the cache holds:
// knownLink looks that host's rules up once per page (robotsMemo) and tests
// each link's path against them, rather than taking the cache's lock and
// finding the User-Agent's group once per link.

// disallowAllRobots is what robotstxt makes of a 5xx robots.txt: nothing is
// allowed. Like allowAllRobots, it is the package's one value of its kind.
var disallowAllRobots, _ = robotstxt.FromStatusAndBytes(500, nil)

// robotsMemo is one host's robots.txt rules for one User-Agent, as the
// cache held them when a page's first link to the host was checked. It never
// changes once made.
type robotsMemo struct {
	// scheme, host and ua are the link's URL fields, as written, and the
	// User-Agent the rules were looked up for.
	scheme, host, ua string
	data             *robotstxt.RobotsData
	// group is data's group for ua.
	group *robotstxt.Group
}

// matches reports whether m holds the rules for u and ua.
func (m *robotsMemo) matches(u *url.URL, ua string) bool {
	return m != nil && m.host == u.Host && m.scheme == u.Scheme && m.ua == ua
}

// allowed is robotstxt's RobotsData.TestAgent for u's path and query, with
// the group found already.
func (m *robotsMemo) allowed(u *url.URL) bool {
	switch m.data {
	case allowAllRobots:
		return true
	case disallowAllRobots:
		return false
	}
	// The path and query, as checkKey tests them.
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p = p + "?" + u.RawQuery
	}
	return m.group.Test(p)
}

// memoFor fills m with the rules the cache holds for u's host, fetched,
// fresh and usable, for ua, and reports whether it holds such; when it
// holds none (none yet, in flight, failed, expired or to be fetched again)
// m is left alone and the link is checked the long way.
func (rc *robotsCache) memoFor(u *url.URL, ua string, m *robotsMemo) bool {
	key := robotsKey(u)
	now := time.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	el, ok := rc.entries[key]
	if !ok {
		return false
	}
	e := el.Value.(*robotsEntry)
	select {
	case <-e.done:
	default:
		return false
	}
	if e.retry || e.err != nil || e.data == nil || !now.Before(e.expires) {
		return false
	}
	*m = robotsMemo{scheme: u.Scheme, host: u.Host, ua: ua, data: e.data, group: e.data.FindGroup(ua)}
	return true
}

// linkRobots is admit's robots.txt check for a link of a page whose links
// share slab: the time to wait for a robots.txt that cannot be fetched now,
// or the error that refuses the link. The first link to a host checks it
// the long way (checkRobots, which also hands the host's Crawl-delay to the
// limiter) and keeps the host's rules for the page's other links.
func (c *Collector) linkRobots(ctx context.Context, cfg *config, slab *linkSlab, u *url.URL, ua string) (time.Time, error) {
	noteCheck(c, checkRobotsStep)
	if cfg.ignoreRobots {
		return time.Time{}, nil
	}
	if m := slab.robots.Load(); m.matches(u, ua) {
		if !m.allowed(u) {
			return time.Time{}, ErrRobotsTxtBlocked
		}
		return time.Time{}, nil
	}
	if c.Paused() && !c.shared.robots.known(u) {
		// Not fetched during a pause: checked when the link would start
		// (knownLink serves in-memory runs only, which keep the wait).
		return time.Now(), nil
	}
	err := c.checkRobots(ctx, cfg, u, ua)
	if err == nil || errors.Is(err, ErrRobotsTxtBlocked) {
		// The slab's own memo serves its first host; a page whose
		// links go to several hosts makes more.
		m := &slab.memo
		if !slab.memoTaken.CompareAndSwap(false, true) {
			m = new(robotsMemo)
		}
		if c.shared.robots.memoFor(u, ua, m) {
			slab.robots.Store(m)
		}
	}
	if err == nil {
		return time.Time{}, nil
	}
	if pending, ok := errors.AsType[*robotsPendingError](err); ok {
		return pending.Until, nil
	}
	if _, ok := errors.AsType[*hostDownError](err); ok {
		return time.Now(), nil
	}
	return time.Time{}, err
}
