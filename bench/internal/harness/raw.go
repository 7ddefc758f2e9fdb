package harness

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/html"
)

// Raw is the baseline: what a careful Go programmer writes with only the
// standard library and a tokenizer. P workers share one frontier; the crawl
// ends when nothing is queued or in flight.
func Raw(ctx context.Context, cfg Config, n *Counters) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// No global cap but the open files: a broad crawl keeps a connection
	// per host, and one idle connection too many fails a dial (EMFILE).
	tr.MaxIdleConns = 0
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<20 {
		tr.MaxIdleConns = int(rl.Cur / 2)
	}
	tr.MaxIdleConnsPerHost = max(cfg.P, cfg.HostPar)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()

	f := newFrontier(cfg)
	stop := context.AfterFunc(ctx, f.wakeAll)
	defer stop()
	start, _ := url.Parse(cfg.Seed)
	f.push(start)

	var wg sync.WaitGroup
	for range cfg.P {
		wg.Go(func() {
			for {
				h, u, ok := f.next(ctx)
				if !ok {
					return
				}
				if cfg.Robots && !h.robots.allowed(ctx, client, u) {
					f.done(h)
					continue
				}
				links, err := fetch(ctx, client, u)
				if err != nil {
					n.Errors.Add(1)
				} else {
					n.Pages.Add(1)
				}
				for _, l := range links {
					f.push(l)
				}
				f.done(h)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// fetch GETs u and returns the links of an HTML answer; a non-2xx status is
// an error.
func fetch(ctx context.Context, client *http.Client, u *url.URL) ([]*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, &statusError{resp.StatusCode}
	}
	links, err := extractLinks(resp.Request.URL, resp.Body)
	_, _ = io.Copy(io.Discard, resp.Body) // let the connection be reused
	return links, err
}

type statusError struct{ code int }

func (e *statusError) Error() string { return http.StatusText(e.code) }

// extractLinks returns the resolved href of every <a> in r.
func extractLinks(base *url.URL, r io.Reader) ([]*url.URL, error) {
	var out []*url.URL
	z := html.NewTokenizer(r)
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				return out, nil
			}
			return out, z.Err()
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if len(name) != 1 || name[0] != 'a' {
				continue
			}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if string(k) == "href" {
					if ref, err := url.Parse(string(v)); err == nil {
						out = append(out, base.ResolveReference(ref))
					}
					break
				}
			}
		}
	}
}

// frontier holds the URLs to fetch, per host, and the visited set. Safe for
// concurrent use.
type frontier struct {
	cfg Config
	// allowed is cfg.Allowed as a set: a broad crawl has thousands.
	allowed map[string]bool
	// mu guards every field below; cond waits on it.
	mu      sync.Mutex
	cond    *sync.Cond
	visited map[string]struct{}
	hosts   map[string]*hostQueue
	order   []*hostQueue // hosts in first-seen order, scanned round-robin
	rr      int
	pending int       // queued + in flight; 0 ends the crawl
	timerAt time.Time // earliest armed wake-up timer, zero if none
	stopped bool
}

type hostQueue struct {
	robots   robotsRules
	name     string
	urls     []*url.URL
	head     int
	inflight int
	next     time.Time // earliest start of the next request (politeness)
}

func newFrontier(cfg Config) *frontier {
	f := &frontier{cfg: cfg, visited: map[string]struct{}{}, hosts: map[string]*hostQueue{}, allowed: map[string]bool{}}
	for _, h := range cfg.Allowed {
		f.allowed[h] = true
	}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// push queues u unless it was seen before or is not on an allowed host.
func (f *frontier) push(u *url.URL) {
	if u.Scheme != "http" && u.Scheme != "https" || !f.allowed[u.Hostname()] {
		return
	}
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" {
		u.Path = "/"
	}
	key := u.String()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.visited[key]; seen {
		return
	}
	f.visited[key] = struct{}{}
	hq := f.hosts[u.Host]
	if hq == nil {
		hq = &hostQueue{name: u.Host}
		f.hosts[u.Host] = hq
		f.order = append(f.order, hq)
	}
	hq.urls = append(hq.urls, u)
	f.pending++
	f.cond.Signal()
}

// next blocks until a URL may be fetched and returns it with its host, or
// returns ok false when the crawl is over or ctx is done.
func (f *frontier) next(ctx context.Context) (hq *hostQueue, u *url.URL, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.pending == 0 || f.stopped || ctx.Err() != nil {
			return nil, nil, false
		}
		now := time.Now()
		var wake time.Time
		for i := range f.order {
			h := f.order[(f.rr+i)%len(f.order)]
			if h.head == len(h.urls) || h.inflight >= f.cfg.HostPar {
				continue
			}
			if f.cfg.Delay > 0 && now.Before(h.next) {
				if wake.IsZero() || h.next.Before(wake) {
					wake = h.next
				}
				continue
			}
			f.rr = (f.rr + i + 1) % len(f.order)
			u = h.urls[h.head]
			h.urls[h.head] = nil
			h.head++
			if h.head > 1024 && h.head*2 > len(h.urls) {
				h.urls = slices.Clone(h.urls[h.head:])
				h.head = 0
			}
			h.inflight++
			h.next = now.Add(f.cfg.Delay)
			return h, u, true
		}
		if !wake.IsZero() && (f.timerAt.IsZero() || wake.Before(f.timerAt)) {
			f.timerAt = wake
			time.AfterFunc(time.Until(wake), func() {
				f.mu.Lock()
				if f.timerAt.Equal(wake) {
					f.timerAt = time.Time{}
				}
				f.cond.Broadcast()
				f.mu.Unlock()
			})
		}
		f.cond.Wait()
	}
}

// done records that a URL of hq was fetched and its links pushed.
func (f *frontier) done(hq *hostQueue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hq.inflight--
	f.pending--
	if f.pending == 0 {
		f.cond.Broadcast()
	} else if hq.head < len(hq.urls) {
		// A slot on hq opened; a waiting worker may take it.
		f.cond.Signal()
	}
}

// wakeAll ends every wait, for cancellation.
func (f *frontier) wakeAll() {
	f.mu.Lock()
	f.stopped = true
	f.cond.Broadcast()
	f.mu.Unlock()
}

// robotsRules are one host's robots.txt rules for every user agent: the
// Disallow prefixes of its "User-agent: *" groups, fetched on first use.
type robotsRules struct {
	once     sync.Once
	disallow []string
}

// allowed reports whether robots.txt of u's host lets u be fetched; a
// robots.txt that cannot be had allows everything.
func (r *robotsRules) allowed(ctx context.Context, client *http.Client, u *url.URL) bool {
	r.once.Do(func() { r.disallow = fetchRobots(ctx, client, u) })
	for _, p := range r.disallow {
		if strings.HasPrefix(u.EscapedPath(), p) {
			return false
		}
	}
	return true
}

func fetchRobots(ctx context.Context, client *http.Client, u *url.URL) []string {
	ru := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ru.String(), nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	var out []string
	all, inGroup := false, false
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 512<<10))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch k {
		case "user-agent":
			if !inGroup {
				all = false
			}
			inGroup = true
			all = all || v == "*"
		case "disallow":
			inGroup = false
			if all && v != "" {
				out = append(out, v)
			}
		default:
			inGroup = false
		}
	}
	return out
}
