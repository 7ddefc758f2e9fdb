package magpie

import (
	"net/http"
	"net/url"
)

// ProxyFunc chooses the proxy for one outgoing request, as http.Transport.Proxy does.
type ProxyFunc func(*http.Request) (*url.URL, error)

type proxyURLKeyType struct{}

// ProxyURLKey is the http.Request context key under which a ProxyFunc may
// store the proxy URL it chose (a string), so that Request.ProxyURL reports it.
var ProxyURLKey = proxyURLKeyType{}
