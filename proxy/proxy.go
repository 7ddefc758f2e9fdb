package proxy

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/magpiecrawl/magpie"
)

// RoundRobinProxySwitcher returns a ProxyFunc that hands out proxyURLs in
// turn, one per call, starting with the first. Each URL must be absolute with
// scheme http, https, socks5 or socks5h (what net/http.Transport can dial).
//
// It returns magpie.ErrEmptyProxyURL when no URL is given, and an error
// wrapping ErrInvalidProxyURL for the first URL that is not valid. The
// returned func is safe for concurrent use (an atomic counter picks the
// proxy), never fails, and reports its choice in the request context as
// magpie.ProxyURLKey describes, with any password replaced by "xxxxx"
// (url.URL.Redacted), so that Request.ProxyURL can be logged.
func RoundRobinProxySwitcher(proxyURLs ...string) (magpie.ProxyFunc, error) {
	if len(proxyURLs) == 0 {
		return nil, magpie.ErrEmptyProxyURL
	}
	urls := make([]*url.URL, len(proxyURLs))
	texts := make([]string, len(proxyURLs))
	for i, s := range proxyURLs {
		u, err := parseProxyURL(s)
		if err != nil {
			return nil, err
		}
		urls[i], texts[i] = u, u.Redacted() // reported without the password
	}
	var next atomic.Uint64
	return func(req *http.Request) (*url.URL, error) {
		i := (next.Add(1) - 1) % uint64(len(urls))
		if box, ok := req.Context().Value(magpie.ProxyURLKey).(*string); ok && box != nil {
			*box = texts[i]
		}
		u := *urls[i] // a copy, so no caller can change the list
		return &u, nil
	}, nil
}

func parseProxyURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidProxyURL, s, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("%w %q: scheme must be http, https, socks5 or socks5h", ErrInvalidProxyURL, s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w %q: no host", ErrInvalidProxyURL, s)
	}
	return u, nil
}
