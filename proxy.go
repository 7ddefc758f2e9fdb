package magpie

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// ProxyFunc chooses the proxy for one outgoing request, as http.Transport.Proxy does.
// It may be called concurrently and, for one Request, more than once (once
// per redirect hop), so it must be safe for concurrent use.
type ProxyFunc func(*http.Request) (*url.URL, error)

type proxyURLKeyType struct{}

// ProxyURLKey is the http.Request context key under which a ProxyFunc may
// store the proxy URL it chose (a string), so that Request.ProxyURL reports it.
//
// The contract: before each round trip the Collector puts a *string box in
// the http.Request's context under ProxyURLKey. A ProxyFunc that wants its
// choice reported writes the proxy URL into that box:
//
//	if box, ok := req.Context().Value(magpie.ProxyURLKey).(*string); ok {
//		*box = chosen.String()
//	}
//
// The transport calls the ProxyFunc on the goroutine that runs the round
// trip, so the write happens before http.Client.Do returns and the Collector
// reads the box afterwards without further locking. For Colly compatibility a
// plain string value under the key (Colly's switcher mutates the request's
// context) is read as well. proxy.RoundRobinProxySwitcher follows this
// contract.
var ProxyURLKey = proxyURLKeyType{}

// proxyURLFromContext returns the proxy URL a ProxyFunc reported in ctx (see
// ProxyURLKey), or "" when none was reported. A password in it is redacted
// (url.URL.Redacted): Request.ProxyURL ends up in logs and exports.
func proxyURLFromContext(ctx context.Context) string {
	switch v := ctx.Value(ProxyURLKey).(type) {
	case *string:
		if v != nil {
			return redactURL(*v)
		}
	case string:
		return redactURL(v)
	}
	return ""
}

// redactURL returns s with the password of its user information replaced
// by "xxxxx", as url.URL.Redacted does; text that does not parse as a URL
// with user information is returned as it is.
func redactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
