// Package render downloads web pages with a headless Chromium, for pages
// whose content or links are built by JavaScript.
//
// A Renderer is a magpie.Fetcher: set it on a collector with
// magpie.WithFetcher (or Collector.SetFetcher) and the GET requests it
// selects are loaded in a browser tab instead of being sent by the HTTP
// client. Everything else in the life of the request is unchanged: OnRequest,
// robots.txt, LimitRules (the request holds its host's slot while the page
// loads, and the host's Delay counts from the first byte of the page),
// OnResponseHeaders, OnResponse, OnHTML, OnError, retries, queues and items.
// The other requests stay on HTTP.
//
// # Choosing pages
//
// Match (URL regular expressions) and Hosts (host globs) select pages; with
// both, a URL must satisfy both; All selects every GET request; Mark selects
// one request from OnRequest. With no rule only marked requests are rendered.
//
// # What callbacks see
//
// The body is the DOM after scripts ran (document.documentElement.outerHTML,
// with its doctype) as UTF-8 text/html; the status, headers and URL are those
// of the main document after redirects. Links added by scripts are in it, so
// OnHTML follows them. A main document that is not HTML (JSON, an image)
// comes back as the browser received it.
//
// A page is read once its load event fired and it has had no request in
// flight for NetworkIdle (default 500 ms), and then, with WaitSelector, once
// an element matches. Timeout (default 30 s) bounds the whole page; a page
// that does not settle fails with ErrTimeout. The browser's start is not
// part of it: LaunchTimeout (default 1 min) bounds that, and a start that
// does not finish in time fails the page with ErrLaunch.
//
// # Cookies and headers
//
// Each tab has its own browser context. Before a page loads, the tab's cookies
// are replaced by the collector jar's cookies for the URL; after, the
// browser's cookies for the final URL go back to the jar, so later HTTP
// requests send what the page set (by Set-Cookie or document.cookie). The
// User-Agent of the request is the browser's; the request's other headers,
// except Accept, Accept-Encoding, Cookie, Host, Authorization and
// Proxy-Authorization, are sent with every request of the page.
//
// # Processes
//
// The browser starts on the first Fetch with a fresh temporary profile,
// headless, with --no-sandbox, --disable-gpu, --disable-quic,
// --disable-background-networking, --disable-component-update and
// --disable-sync. It ends, its profile removed, when a crawl that used it
// stops (the collector calls Idle before Wait or Stop returns) or at Close,
// and starts again on the next Fetch; a crashed browser fails its pages with
// ErrBrowserCrashed and is replaced on the next Fetch.
//
// # Limits
//
// Redirects are followed by the browser, so magpie's redirect checks
// (domains, robots.txt of the target) do not see them, and the final URL is
// not marked visited. The HTTP cache (CacheDir) stores the rendered body like
// any other. Requests the page makes for images, scripts and data are not
// subject to LimitRules or robots.txt.
package render
