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
	// mu guards bases and dirs.
	mu    sync.RWMutex
	bases []string // ASCII, lower case: hosts, or registrable domains for domain
	// dirs, set by --no-parent (keepBelow), holds by host the directories
	// of the start URLs and of where they landed: a URL on such a host
	// must be in one of them or below.
	dirs map[string][]string
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
	return s.allowsHost(u) && s.belowStart(u)
}

// allowsHost reports whether u's host is in the scope.
func (s *scope) allowsHost(u *url.URL) bool {
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

// keepBelow turns on --no-parent, as wget's: on the host of a start URL,
// the crawl follows only URLs in the start URL's directory or below it
// (from /a/ or /a/b.html, /a/ and below; from /a, the whole host, since
// its directory is /). Other hosts the scope allows are not restricted.
func (s *scope) keepBelow(starts []*url.URL) {
	s.mu.Lock()
	s.dirs = map[string][]string{}
	s.mu.Unlock()
	for _, u := range starts {
		s.land(u)
	}
}

// land adds the directory of u, a start URL or where one landed after its
// redirects, under --no-parent.
func (s *scope) land(u *url.URL) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirs == nil {
		return
	}
	h, d := hostOf(u), dirOf(u)
	if !slices.Contains(s.dirs[h], d) {
		s.dirs[h] = append(s.dirs[h], d)
	}
}

// belowStart reports whether u is in a start directory of its host or
// below it, or on a host without one; always true without --no-parent.
func (s *scope) belowStart(u *url.URL) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dirs, ok := s.dirs[hostOf(u)]
	if !ok {
		return true
	}
	d := dirOf(u)
	for _, start := range dirs {
		if strings.HasPrefix(d, start) {
			return true
		}
	}
	return false
}

// dirOf is the directory of u's path, as wget takes it: up to and
// including the last slash ("/a/" for /a/b.html and /a/, "/" for /a).
func dirOf(u *url.URL) string {
	p := u.EscapedPath()
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "/"
	}
	return p[:i+1]
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

// parentError is a redirect above the start directories (--no-parent);
// errors.Is magpie.ErrForbiddenDomain holds.
type parentError struct{ url string }

func (e *parentError) Error() string {
	return e.url + " is above the start URL's directory (--no-parent)"
}

func (e *parentError) Unwrap() error { return magpie.ErrForbiddenDomain }

// redirects returns the collector's redirect handler: a start URL's own
// redirects are followed wherever they go (its landing host joins the
// scope once the page arrives, and under --no-parent its directory), later
// ones only within the scope.
func (s *scope) redirects(st *starts) func(*http.Request, []*http.Request) error {
	return func(next *http.Request, via []*http.Request) error {
		if s.allows(next.URL) || st.isStart(via[0].URL) {
			return nil
		}
		if s.allowsHost(next.URL) {
			return &parentError{url: next.URL.Redacted()}
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
