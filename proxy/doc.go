// Package proxy provides proxy switchers for magpie: functions that choose a
// proxy for each outgoing request, to set with Collector.SetProxyFunc.
//
// A switcher reports the proxy it chose through the request context as
// described at magpie.ProxyURLKey, so that Request.ProxyURL tells callbacks
// which proxy fetched a page.
//
// net/http's Transport asks its Proxy function for every request and pools
// connections per proxy, so a switcher rotates per request while keep-alive
// connections stay open (Colly turns keep-alives off instead).
package proxy
