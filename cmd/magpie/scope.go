package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/magpiecrawl/magpie"
)

// scope is what --scope lets the crawl follow: the hosts (host), hosts and
// their subdomains (subdomains), or registrable domains (domain) of the
// start URLs and of where their redirects landed, as wget takes the scope
// from where a start URL lands. Safe for concurrent use.
type scope struct {
	mode string // host, subdomains or domain
	// mu guards bases.
	mu    sync.RWMutex
	bases []string // ASCII, lower case: hosts, or registrable domains for domain
}

func newScope(mode string, starts []*url.URL) *scope {
	if mode == "" {
		mode = "host"
	}
	s := &scope{mode: mode}
	for _, u := range starts {
		s.add(u)
	}
	return s
}

// hostOf is u's host name as the scope compares it.
func hostOf(u *url.URL) string {
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if a, err := idna.Lookup.ToASCII(h); err == nil {
		h = a
	}
	return h
}

// base is what a host adds to the scope.
func (s *scope) base(host string) string {
	if s.mode == "domain" {
		if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
			return d
		}
	}
	return host
}

// add puts u's host in the scope: a start URL, or where one landed.
func (s *scope) add(u *url.URL) {
	b := s.base(hostOf(u))
	if b == "" {
		return
	}
	s.mu.RLock()
	known := slices.Contains(s.bases, b)
	s.mu.RUnlock()
	if known {
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.bases, b) {
		s.bases = append(s.bases, b)
	}
	s.mu.Unlock()
}

// allows reports whether the crawl may follow u. URLs that are not http or
// https are left to the collector, which refuses them with their own reason.
func (s *scope) allows(u *url.URL) bool {
	if u.Scheme != "http" && u.Scheme != "https" {
		return true
	}
	h := hostOf(u)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, b := range s.bases {
		if h == b || s.mode != "host" && strings.HasSuffix(h, "."+b) {
			return true
		}
	}
	return false
}

// wider names the --scope value that would let u in, or "" when none would
// (another site).
func (s *scope) wider(u *url.URL) string {
	h := hostOf(u)
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return ""
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	want := ""
	for _, b := range s.bases {
		switch {
		case s.mode == "host" && strings.HasSuffix(h, "."+b):
			return "subdomains"
		case s.mode != "domain":
			if bd, err := publicsuffix.EffectiveTLDPlusOne(b); err == nil && bd == d {
				want = "domain"
			}
		}
	}
	return want
}

// scopeError is a redirect that leaves the scope; errors.Is
// magpie.ErrForbiddenDomain holds.
type scopeError struct {
	host, mode, wider string
}

func (e *scopeError) Error() string {
	if e.wider == "" {
		return fmt.Sprintf("%s is outside --scope %s (another site)", e.host, e.mode)
	}
	return fmt.Sprintf("%s is outside --scope %s (--scope %s would include it)", e.host, e.mode, e.wider)
}

func (e *scopeError) Unwrap() error { return magpie.ErrForbiddenDomain }

// redirects returns the collector's redirect handler: a start URL's own
// redirects are followed wherever they go (its landing host joins the
// scope once the page arrives), later ones only within the scope.
func (s *scope) redirects(st *starts) func(*http.Request, []*http.Request) error {
	return func(next *http.Request, via []*http.Request) error {
		if s.allows(next.URL) || st.isStart(via[0].URL) {
			return nil
		}
		return &scopeError{host: next.URL.Hostname(), mode: s.mode, wider: s.wider(next.URL)}
	}
}

// isStart reports whether u is one of the start URLs.
func (s *starts) isStart(u *url.URL) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byKey[startKey(u)]
	return ok
}
