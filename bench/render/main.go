// Command bench-render measures rendered crawling: it serves a local site of
// -pages pages whose links are partly built by JavaScript, crawls it with
// render at each -tabs value and over plain HTTP, and prints a markdown
// table of pages, pages/s and the peak RSS of the process tree (this
// process and every browser process under it, sampled every -sample; also the
// PSS sum, which counts shared pages once).
//
//	cd bench/render && go run . [-pages 500] [-tabs 4,8] [-idle 500ms]
//
// Page /p/i links statically to /p/(2i+1) and gets its link to /p/(2i+2)
// from a script, after fetching /data/i.json; it also loads /app.js. /s/i is
// the same tree with both links static, the HTTP baseline for the same
// number of pages.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/render"
)

func main() {
	pages := flag.Int("pages", 500, "pages in the site")
	tabsList := flag.String("tabs", "4,8", "comma-separated tab counts to render with")
	idle := flag.Duration("idle", render.DefaultNetworkIdle, "render.NetworkIdle quiet period")
	sample := flag.Duration("sample", 100*time.Millisecond, "how often the process tree's memory is sampled")
	selector := flag.Bool("selector", true, "also run the highest tab count with NetworkIdle(0) and WaitSelector")
	flag.Parse()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	st := &siteStats{}
	srv := &http.Server{Handler: site(*pages, st), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	fmt.Printf("| mode | tabs | pages crawled | errors | /app.js loads | wall s | pages/s | peak RSS MB (tree sum) | peak PSS MB (tree sum) | browser procs (peak) |\n")
	fmt.Printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	row := func(mode, tabs string, r result, st *siteStats) {
		fmt.Printf("| %s | %s | %d | %d | %d | %.2f | %.1f | %.0f | %.0f | %d |\n", mode, tabs, r.pages, r.errors,
			st.assets.Load(), r.wall.Seconds(), float64(r.pages)/r.wall.Seconds(), float64(r.peakRSS)/(1<<20),
			float64(r.peakPSS)/(1<<20), r.peakProcs)
	}
	st.reset()
	row("http, JS-built links (/p/)", "-", crawl(base+"/p/0", nil, *sample), st)
	st.reset()
	row("http, all links static (/s/)", "-", crawl(base+"/s/0", nil, *sample), st)
	var tabs []int
	for f := range strings.SplitSeq(*tabsList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("-tabs %q: %v", *tabsList, f)
		}
		tabs = append(tabs, n)
	}
	for _, n := range tabs {
		st.reset()
		r, err := render.New(render.Match(`/p/`), render.Tabs(n), render.NetworkIdle(*idle))
		if err != nil {
			log.Fatal(err)
		}
		row(fmt.Sprintf("rendered, NetworkIdle %v", *idle), strconv.Itoa(n), crawl(base+"/p/0", r, *sample), st)
		_ = r.Close()
	}
	if *selector && len(tabs) > 0 {
		n := tabs[len(tabs)-1]
		st.reset()
		r, err := render.New(render.Match(`/p/`), render.Tabs(n), render.NetworkIdle(0), render.WaitSelector(".js"))
		if err != nil {
			log.Fatal(err)
		}
		row("rendered, NetworkIdle 0 + WaitSelector", strconv.Itoa(n), crawl(base+"/p/0", r, *sample), st)
		_ = r.Close()
	}
}

type result struct {
	pages, errors int
	wall          time.Duration
	peakRSS       int64
	peakPSS       int64
	peakProcs     int
}

// crawl crawls from start (with f as Fetcher if not nil) and samples the
// RSS of the process tree meanwhile.
func crawl(start string, f magpie.Fetcher, sample time.Duration) result {
	opts := []magpie.CollectorOption{magpie.Async(), magpie.IgnoreRobotsTxt()}
	if f != nil {
		opts = append(opts, magpie.WithFetcher(f))
	}
	c := magpie.NewCollector(opts...)
	var pages, errs atomic.Int64
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(*magpie.Response) { pages.Add(1) })
	c.OnError(func(r *magpie.Response, err error) {
		if errs.Add(1) <= 3 {
			log.Printf("error: %s: %v", r.Request.URL, err)
		}
	})
	var res result
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(sample)
		defer t.Stop()
		for {
			rss, pss, n := treeRSS(os.Getpid())
			res.peakRSS = max(res.peakRSS, rss)
			res.peakPSS = max(res.peakPSS, pss)
			res.peakProcs = max(res.peakProcs, n-1)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	begin := time.Now()
	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()
	res.wall = time.Since(begin)
	close(done)
	wg.Wait()
	res.pages, res.errors = int(pages.Load()), int(errs.Load())
	return res
}

// treeRSS sums VmRSS and Pss (bytes) over pid and its descendants and
// counts them. The RSS sum counts the pages the browser's processes share
// once per process; the PSS sum splits them.
func treeRSS(pid int) (rss, pss int64, n int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, 0
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The ppid is the second field after the parenthesised command.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(fields[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n++
		rss += procKB(p, "status", "VmRSS:") << 10
		pss += procKB(p, "smaps_rollup", "Pss:") << 10
		stack = append(stack, children[p]...)
	}
	return rss, pss, n
}

// procKB reads the kB value of the line starting with key in /proc/pid/file.
func procKB(pid int, file, key string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// siteStats counts what only a browser loads.
type siteStats struct {
	assets atomic.Int64
}

func (s *siteStats) reset() { s.assets.Store(0) }

// site serves the /p/ (JS-built links) and /s/ (static) trees of n pages.
func site(n int, st *siteStats) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		st.assets.Add(1)
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `window.addLink = (href) => { const a = document.createElement(href ? 'a' : 'span'); if (href) a.href = href; a.className = 'js'; a.textContent = href || 'leaf'; document.getElementById('links').appendChild(a); };`)
	})
	mux.HandleFunc("/data/{i}", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimSuffix(r.PathValue("i"), ".json"))
		w.Header().Set("Content-Type", "application/json")
		next := 2*i + 2
		if next >= n {
			next = -1
		}
		fmt.Fprintf(w, `{"next": %d, "title": "Page %d"}`, next, i)
	})
	page := func(w http.ResponseWriter, r *http.Request, static bool) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		prefix := "/p/"
		if static {
			prefix = "/s/"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "<!DOCTYPE html><html><head><title>Page %d</title>", i)
		if !static {
			b.WriteString(`<script src="/app.js"></script>`)
		}
		fmt.Fprintf(&b, "</head><body><h1>Page %d</h1><p>%s</p><div id=\"links\">", i, strings.Repeat("Lorem ipsum dolor sit amet. ", 40))
		if l := 2*i + 1; l < n {
			fmt.Fprintf(&b, `<a href="%s%d">left</a>`, prefix, l)
		}
		if l := 2*i + 2; l < n && static {
			fmt.Fprintf(&b, `<a href="%s%d">right</a>`, prefix, l)
		}
		b.WriteString("</div>")
		if !static {
			// Every page's script adds an element of class js: a link to
			// the right child, or a marker on a leaf (for WaitSelector).
			fmt.Fprintf(&b, `<script>fetch('/data/%d.json').then(r => r.json()).then(d => addLink(d.next >= 0 ? '%s' + d.next : null));</script>`, i, prefix)
		}
		b.WriteString("</body></html>")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, b.String())
	}
	mux.HandleFunc("/p/{i}", func(w http.ResponseWriter, r *http.Request) { page(w, r, false) })
	mux.HandleFunc("/s/{i}", func(w http.ResponseWriter, r *http.Request) { page(w, r, true) })
	return mux
}
