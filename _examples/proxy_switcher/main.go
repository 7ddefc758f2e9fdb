// Proxy switcher: send requests through several proxies in turn.
//
//	go run ./_examples/proxy_switcher [URL PROXY_URL...]
//
// Without arguments it starts a local site and two local forwarding proxies,
// each of which marks the responses it forwards, and crawls through them.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	"github.com/magpiecrawl/magpie/proxy"
)

func main() {
	var start string
	var proxies []string
	if len(os.Args) > 2 {
		start, proxies = os.Args[1], os.Args[2:]
	} else {
		srv := site.Start()
		defer srv.Close()
		start = srv.URL + "/page/1"
		for _, name := range []string{"proxy-A", "proxy-B"} {
			p := httptest.NewServer(forwardingProxy(name))
			defer p.Close()
			proxies = append(proxies, p.URL)
		}
	}
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()), magpie.MaxDepth(3))
	switcher, err := proxy.RoundRobinProxySwitcher(proxies...)
	if err != nil {
		log.Fatal(err)
	}
	c.SetProxyFunc(switcher)

	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(r *magpie.Response) {
		via := r.Headers.Get("X-Forwarded-By")
		fmt.Printf("%s via %s (%s)\n", r.Request.URL.Path, r.Request.ProxyURL, via)
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
}

// forwardingProxy is a minimal HTTP forward proxy for plain http:// URLs; it
// marks each response with its name.
func forwardingProxy(name string) http.Handler {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "this is a proxy: send an absolute URL", http.StatusBadRequest)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out.Header = r.Header.Clone()
		out.Header.Del("Proxy-Connection")
		res, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("X-Forwarded-By", name)
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	})
}
