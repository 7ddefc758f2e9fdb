package proxy

import "errors"

// ErrInvalidProxyURL is returned when a proxy URL does not parse, has no
// host, or has a scheme other than http, https, socks5 or socks5h.
var ErrInvalidProxyURL = errors.New("proxy: invalid proxy URL")
