package magpie

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// credentialHeaders are the headers that carry credentials; they are sent
// only to the hosts they were meant for.
var credentialHeaders = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// CredentialHosts names more hosts (a hostname, any port; or host:port) to
// which the Authorization, Cookie and Proxy-Authorization headers that you
// set may be sent. See credentialScope for the rule.
func CredentialHosts(hosts ...string) CollectorOption {
	return func(c *Collector) {
		for _, h := range hosts {
			c.shared.creds.add(asciiHostPort(strings.TrimSpace(h)))
		}
	}
}

// credentialScope holds the hosts that may receive the credential headers
// set by the user (in Headers, a request's headers or OnRequest): the hosts
// of the requests the user started (Visit, Request, Post..., queue AddURL:
// every request not made from a callback's page), and those named with
// CredentialHosts. A request to any other host — a link found on a page —
// is sent without them, as Go's client drops them on a redirect to another
// host: credentials set for one site must not leak to every site the crawl
// reaches. Cookies from the cookie jar are scoped by the jar and not
// affected. Safe for concurrent use; shared with clones.
type credentialScope struct {
	// mu guards hosts.
	mu    sync.RWMutex
	hosts map[string]bool
}

func (s *credentialScope) add(host string) {
	if host == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosts == nil {
		s.hosts = make(map[string]bool)
	}
	s.hosts[host] = true
}

// allows reports whether u's host may receive the credential headers.
func (s *credentialScope) allows(u *url.URL) bool {
	hostport := strings.ToLower(u.Host)
	name := strings.ToLower(u.Hostname())
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hosts[hostport] || s.hosts[name]
}

// noteStart records the host of a request the user started.
func (s *credentialScope) noteStart(req *Request) {
	if req.parentURL != "" || req.URL == nil {
		return
	}
	host := strings.ToLower(req.URL.Host)
	if req.URL.Port() == "" {
		// No port written: the scheme's default one is meant.
		host = net.JoinHostPort(strings.ToLower(req.URL.Hostname()), defaultPort(req.URL.Scheme))
	}
	s.mu.RLock()
	known := s.hosts[host]
	s.mu.RUnlock()
	if !known {
		s.add(host)
	}
}

// strip removes the credential headers from h for a request to u outside
// the scope, and reports which it removed.
func (s *credentialScope) strip(u *url.URL, h http.Header) []string {
	if !slices.ContainsFunc(credentialHeaders, func(k string) bool { _, ok := h[k]; return ok }) {
		return nil
	}
	target := *u
	if target.Port() == "" {
		target.Host = net.JoinHostPort(target.Hostname(), defaultPort(target.Scheme))
	}
	if s.allows(&target) {
		return nil
	}
	var removed []string
	for _, k := range credentialHeaders {
		if _, ok := h[k]; ok {
			h.Del(k)
			removed = append(removed, k)
		}
	}
	return removed
}

func defaultPort(scheme string) string {
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}

// asciiHostPort is asciiHost for a hostname with or without a port, so that
// a Unicode spelling matches the punycode a link's URL carries.
func asciiHostPort(h string) string {
	if host, port, err := net.SplitHostPort(h); err == nil {
		return net.JoinHostPort(asciiHost(host), port)
	}
	return asciiHost(h)
}
