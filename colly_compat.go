package magpie

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

type checkRevisitKeyType struct{}

// CheckRevisitKey is the http.Request context key, as in Colly, under which
// the Collector says (a bool) whether the visited check applies to the
// targets of this request's redirects: false for Retry and when
// AllowURLRevisit is set. A redirect handler (SetRedirectHandler) can read it.
var CheckRevisitKey = checkRevisitKeyType{}

// Init resets the collector to NewCollector's defaults, as Colly's Init
// does: every exported field, the options, and fresh storage, cookie jar,
// HTTP client, limit rules and robots.txt cache. Callbacks are kept. Colly
// programs call it on a Collector they build by hand; NewCollector calls it
// already. It must not be called while the collector crawls.
func (c *Collector) Init() {
	c.UserAgent = defaultUserAgent
	c.Headers = nil
	c.MaxDepth = 0
	c.MaxRequests = 0
	c.AllowedDomains = nil
	c.DisallowedDomains = nil
	c.DisallowedURLFilters = nil
	c.URLFilters = nil
	c.AllowURLRevisit = false
	c.MaxBodySize = 10 << 20
	c.CacheDir = ""
	c.CacheExpiration = 0
	c.IgnoreRobotsTxt = false
	c.Async = false
	c.ParseHTTPErrorResponse = false
	c.ID = collectorIDs.Add(1)
	c.DetectCharset = false
	c.CheckHead = false
	c.TraceHTTP = false
	c.Context = context.Background()
	c.SortQuery = false
	c.settings = defaultSettings()
	c.visitMu = &sync.Mutex{}
	c.limitNotes.Clear()
	st := &storage.InMemoryStorage{}
	_ = st.Init() // in-memory Init cannot fail
	c.shared = &shared{limiter: limits.New(), store: st}
	c.shared.backend = newHTTPBackend(c.shared)
	c.shared.robots = newRobotsCache(robotsTTL, c.fetchRobots)
	c.shared.robots.onSitemaps = c.robotsSitemaps
}

// Appengine keeps Colly's signature. Colly swaps in App Engine's urlfetch
// client, which the current App Engine runtimes no longer need (they allow
// outbound net/http): here it only makes ctx the context that requests run
// under, as StdlibContext does.
func (c *Collector) Appengine(ctx context.Context) {
	c.Context = ctx
}

// MarshalBinary encodes the context's values as JSON, as Colly's does.
// Values that JSON cannot encode make it fail.
func (c *Context) MarshalBinary() ([]byte, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return json.Marshal(c.m)
}

// UnmarshalBinary replaces the context's values with those in data (JSON
// from MarshalBinary). Numbers come back as float64 and other values as
// JSON's types, as with any JSON round trip.
func (c *Context) UnmarshalBinary(data []byte) error {
	m := make(map[string]any)
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = m
	return nil
}
