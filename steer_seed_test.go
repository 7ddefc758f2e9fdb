package magpie

import (
	"errors"
	"testing"
)

// TestAddSeed: a seed added to a running crawl is fetched once, in every
// mode (sync Visit from another goroutine, async, a queue run over each
// store); a seed out of scope is refused with Visit's error and reaches
// OnRefused; once the crawl is over AddSeed says no crawl runs.
func TestAddSeed(t *testing.T) {
	const n = 3
	modes := map[string]func(t *testing.T, c *Collector, root string) <-chan error{
		"sync": func(t *testing.T, c *Collector, root string) <-chan error {
			done := make(chan error, 1)
			go func() { done <- c.Visit(root) }()
			return done
		},
		"async": func(t *testing.T, c *Collector, root string) <-chan error {
			c.Async = true
			done := make(chan error, 1)
			if err := c.Visit(root); err != nil {
				t.Fatal(err)
			}
			go func() { c.Wait(); done <- nil }()
			return done
		},
	}
	for name, mk := range pauseQueues(t) {
		modes["queue/"+name] = func(t *testing.T, c *Collector, root string) <-chan error {
			q := mk(t)
			pushURL(t, q, root)
			done := make(chan error, 1)
			go func() { done <- c.RunQueue(t.Context(), q, 2) }()
			return done
		}
	}
	for name, start := range modes {
		t.Run(name, func(t *testing.T) {
			s := newPauseSite(t, n)
			c := NewCollector(IgnoreRobotsTxt(), AllowedDomains("127.0.0.1"))
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			refused := make(chan error, 1)
			c.OnRefused(func(_ *Request, err error) {
				if errors.Is(err, ErrForbiddenDomain) {
					refused <- err
				}
			})
			done := start(t, c, s.URL+"/")
			if p := waitFor(t, s.arrived, "the root"); p != "/" {
				t.Fatalf("first request %s, want /", p)
			}
			// The root's links wait at the server: the crawl runs.
			waitFor(t, s.arrived, "a link")
			if err := c.AddSeed(s.URL + "/p/extra"); err != nil {
				t.Fatalf("AddSeed() = %v", err)
			}
			if err := c.AddSeed("http://elsewhere.example/"); !errors.Is(err, ErrForbiddenDomain) {
				t.Errorf("AddSeed(out of scope) = %v, want ErrForbiddenDomain", err)
			}
			if err := waitFor(t, refused, "OnRefused"); !errors.Is(err, ErrForbiddenDomain) {
				t.Errorf("OnRefused got %v", err)
			}
			close(s.release)
			if err := waitFor(t, done, "the crawl"); err != nil {
				t.Fatal(err)
			}
			if got := s.counts()["/p/extra"]; got != 1 {
				t.Errorf("the added seed was fetched %d times, want 1", got)
			}
			if got := s.counts(); len(got) != n+2 {
				t.Errorf("%d paths fetched, want %d: %v", len(got), n+2, got)
			}
			if err := c.AddSeed(s.URL + "/p/late"); !errors.Is(err, ErrNoCrawl) {
				t.Errorf("AddSeed after the crawl = %v, want ErrNoCrawl", err)
			}
		})
	}
}

// TestAddSeedBadURL: a URL that does not parse is refused with
// ErrInvalidURL, not a panic.
func TestAddSeedBadURL(t *testing.T) {
	s := newPauseSite(t, 1)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s.arrived, "the root")
	for _, u := range []string{"http://[::1", "ftp://x/"} {
		if err := c.AddSeed(u); err == nil {
			t.Errorf("AddSeed(%q) = nil, want an error", u)
		}
	}
	close(s.release)
	c.Wait()
}
