// Package extensions holds small, optional behaviours for a
// magpie.Collector, with Colly's names: each function registers callbacks on
// the collector it is given (so call it before the crawl starts) and returns
// nothing.
//
//	c := magpie.NewCollector()
//	extensions.RandomUserAgent(c)
//	extensions.Referer(c)
//	extensions.URLLengthFilter(c, 2048)
//
// Every function is safe to call from any goroutine, and the callbacks it
// registers are safe for the concurrent requests of an async or queue crawl.
package extensions
