package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Hub mode (-frontier N) serves a site built to grow a crawler's frontier
// rather than to be crawled to the end: "/" links to the hub pages "/h/0" ..
// "/h/H-1", hub i links to the leaves "/l/(i*K)" .. "/l/(i*K+K-1)" (K is
// -hub-links, the last hub fewer so there are exactly N leaves), and a leaf
// links nowhere. After "/" and the H hubs, N distinct URLs are waiting;
// one giant page would measure the HTML parser instead of the frontier.

// hubCount is the number of hub pages for n leaves of k links per hub.
func hubCount(n, k int) int { return (n + k - 1) / k }

// hubPage answers a hub-mode path; ok is false for a path the site does not
// have.
func (g *generator) hubPage(path string) (body []byte, ok bool) {
	n, k := g.cfg.frontier, g.cfg.hubLinks
	if path == "/" {
		var b strings.Builder
		b.WriteString("<!DOCTYPE html>\n<html><head><title>Hubs</title></head><body>\n")
		for i := range hubCount(n, k) {
			fmt.Fprintf(&b, "<a href=\"/h/%d\">hub %d</a>\n", i, i)
		}
		b.WriteString("</body></html>\n")
		return []byte(b.String()), true
	}
	if s, cut := strings.CutPrefix(path, "/h/"); cut {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || i >= hubCount(n, k) || strconv.Itoa(i) != s {
			return nil, false
		}
		first, last := i*k, min((i+1)*k, n)
		b := make([]byte, 0, 64+(last-first)*32)
		b = fmt.Appendf(b, "<!DOCTYPE html>\n<html><head><title>Hub %d</title></head><body>\n", i)
		for l := first; l < last; l++ {
			b = fmt.Appendf(b, "<a href=\"/l/%d\">%d</a>\n", l, l)
		}
		return append(b, "</body></html>\n"...), true
	}
	if s, cut := strings.CutPrefix(path, "/l/"); cut {
		l, err := strconv.Atoi(s)
		if err != nil || l < 0 || l >= n || strconv.Itoa(l) != s {
			return nil, false
		}
		return fmt.Appendf(nil, "<!DOCTYPE html>\n<html><head><title>Leaf %d</title></head><body><p>%s</p></body></html>\n",
			l, g.paras[l%len(g.paras)]), true
	}
	return nil, false
}
