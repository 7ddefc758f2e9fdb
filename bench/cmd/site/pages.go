package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// generator builds pages on demand. Pages are not cached: a 200,000-page site
// of 16 KB pages would not fit comfortably in memory, and assembling a page
// from precomputed paragraphs costs little next to what a crawler spends.
type generator struct {
	cfg   config
	bases []string
	// paras is a fixed pool of filler paragraphs (already HTML-escaped
	// plain words) drawn from by every page.
	paras []string
}

var words = strings.Fields(`magpie crawl scheduler buffer pool frontier request response
	worker host delay parallel robots visited queue storage limit rule callback element
	anchor link page index archive river mountain harbour market lantern orchard meadow
	copper silver granite willow thistle falcon heron otter badger maple cedar juniper
	signal packet socket stream header cookie charset token parser selector document`)

func newGenerator(cfg config, bases []string) *generator {
	g := &generator{cfg: cfg, bases: bases}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x9e3779b97f4a7c15))
	g.paras = make([]string, 64)
	for i := range g.paras {
		var b strings.Builder
		n := 40 + rng.IntN(80)
		for w := range n {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte('.')
		g.paras[i] = b.String()
	}
	return g
}

// pageKind tells what a path names.
type pageKind int

const (
	kindNone pageKind = iota
	kindPage
	kindPrivate
)

// pageNumber maps a path to the page it names: "/" is page 0, "/p/N" page N,
// and "/private/N" (robots mode only) a private leaf page.
func (g *generator) pageNumber(path string) (int, pageKind) {
	if path == "/" {
		return 0, kindPage
	}
	if s, ok := strings.CutPrefix(path, "/p/"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n >= g.cfg.pages || strconv.Itoa(n) != s {
			return 0, kindNone
		}
		return n, kindPage
	}
	if s, ok := strings.CutPrefix(path, "/private/"); ok && g.cfg.robots {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || strconv.Itoa(n) != s {
			return 0, kindNone
		}
		return n, kindPrivate
	}
	return 0, kindNone
}

func pagePath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(i)
}

// href is the path a link to page i of host h carries: pagePath(i), and in
// rank mode (-rank) the page's rank as a query, "/p/7?rank=123456", so that
// a crawler can rank a link from its URL alone, as a program ranks the
// links of a site it does not control by URL pattern.
func (g *generator) href(h, i int) string {
	if !g.cfg.rank {
		return pagePath(i)
	}
	return pagePath(i) + "?rank=" + strconv.Itoa(g.rank(h, i))
}

// maxRank bounds the ranks of rank mode: a page's rank is in [0, maxRank).
const maxRank = 1_000_000

// rank is page i of host h's rank in rank mode: a function of (-seed, h,
// i) spread evenly over [0, maxRank), unrelated to where the page sits in
// the link graph, so that the order links are found in says nothing of
// their rank.
func (g *generator) rank(h, i int) int {
	// splitmix64's finaliser over the seed and the page.
	x := g.cfg.seed ^ (uint64(h)<<32 | uint64(uint32(i))) ^ 0x5851f42d4c957f2d
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % maxRank)
}

func (g *generator) robotsTxt() []byte {
	if g.cfg.robots {
		return []byte("User-agent: *\nDisallow: /private/\n")
	}
	return []byte("User-agent: *\nDisallow:\n")
}

func (g *generator) rng(h, i int) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.seed, uint64(h)<<32|uint64(uint32(i))))
}

// fails reports whether page i of host h is one of the pages that always
// answers 500. The first page of the first host never fails, so a crawl
// always starts.
func (g *generator) fails(h, i int) bool {
	if g.cfg.errorRate <= 0 || (h == 0 && i == 0) {
		return false
	}
	rng := rand.New(rand.NewPCG(g.cfg.seed^0xdeadbeef, uint64(h)<<32|uint64(uint32(i))))
	return rng.Float64() < g.cfg.errorRate
}

// links returns the hrefs page i of host h carries, in document order.
func (g *generator) links(h, i int, rng *rand.Rand) []string {
	cfg := g.cfg
	out := make([]string, 0, cfg.links)

	// The chain that makes every page reachable from the first host's "/".
	switch {
	case i+1 < cfg.pages:
		out = append(out, g.href(h, i+1))
	case h+1 < cfg.hosts:
		out = append(out, g.bases[h+1]+g.href(h+1, 0))
	default:
		out = append(out, g.href(h, 0))
	}
	for len(out) < cfg.links-2 {
		th := h
		if cfg.hosts > 1 && rng.IntN(10) < 3 {
			th = rng.IntN(cfg.hosts)
		}
		if cfg.robots && rng.IntN(20) == 0 {
			out = append(out, "/private/"+strconv.Itoa(rng.IntN(cfg.pages)))
			continue
		}
		p := g.href(th, rng.IntN(cfg.pages))
		switch {
		case th != h:
			out = append(out, g.bases[th]+p)
		case rng.IntN(4) == 0:
			// Same host written absolutely: crawlers must see it as the
			// same URL as the relative form.
			out = append(out, g.bases[h]+p)
		default:
			out = append(out, p)
		}
	}
	out = append(out, out[rng.IntN(len(out))])
	out = append(out, "http://external.invalid/p/"+strconv.Itoa(rng.IntN(cfg.pages)))
	return out
}

// page renders page i of host h.
func (g *generator) page(h, i int) []byte {
	rng := g.rng(h, i)
	links := g.links(h, i, rng)
	target := g.cfg.sizeKB * 1024
	b := make([]byte, 0, target+2048)

	b = fmt.Appendf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"+
		"<title>Host %d page %d</title>\n</head>\n<body>\n", h, i)
	// The first two links go in the nav, the rest among the paragraphs.
	b = append(b, "<nav><ul>\n"...)
	nav := min(2, len(links))
	for _, l := range links[:nav] {
		b = fmt.Appendf(b, "<li><a href=\"%s\">%s</a></li>\n", l, l)
	}
	b = append(b, "</ul></nav>\n<main>\n"...)
	b = fmt.Appendf(b, "<h1>Host %d, page %d</h1>\n", h, i)
	rest := links[nav:]
	section := 0
	for len(rest) > 0 || len(b) < target {
		if section%3 == 0 {
			b = fmt.Appendf(b, "<h2>Section %d</h2>\n", section/3+1)
		}
		section++
		b = append(b, "<p>"...)
		b = append(b, g.paras[rng.IntN(len(g.paras))]...)
		if len(rest) > 0 {
			b = fmt.Appendf(b, " See <a href=\"%s\">%s</a>.", rest[0], words[rng.IntN(len(words))])
			rest = rest[1:]
		}
		b = append(b, "</p>\n"...)
	}
	b = append(b, "</main>\n<footer><p>synthetic site</p></footer>\n</body>\n</html>\n"...)
	return b
}

// privatePage renders a leaf page under /private/, which robots.txt
// disallows in robots mode.
func (g *generator) privatePage(n int) []byte {
	return fmt.Appendf(nil, "<!DOCTYPE html>\n<html><head><title>Private %d</title></head>"+
		"<body><h1>Private %d</h1><p>%s</p></body></html>\n", n, n, g.paras[n%len(g.paras)])
}
