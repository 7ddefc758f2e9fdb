// Package proxy provides proxy switchers for magpie: functions that choose a
// proxy for each outgoing request, to set with Collector.SetProxyFunc.
//
// A switcher reports the proxy it chose through the request context as
// described at magpie.ProxyURLKey, so that Request.ProxyURL tells callbacks
// which proxy fetched a page.
//
// Rotation happens per request only when the transport asks for a proxy per
// request: net/http asks once per new connection, so keep-alive connections
// keep their proxy. The Collector disables keep-alives when a proxy func is
// set, as Colly does.
package proxy
