// Command recrawl measures issue 30's recrawl on a copy of a static site
// served by a web server the caller started (bench/recrawl.sh starts nginx
// on the PostgreSQL manual): it crawls the site once as a queue run over
// the store named by -store, changes 20 pages, deletes 5 and adds 5 linked
// from a changed one in -root, crawls again over the same store, and
// prints one JSON line: pages, each crawl's wall time and body bytes, the
// second crawl's change counts, and whether they are exactly the edits.
// It exits 1 when they are not.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

type result struct {
	Store       string   `json:"store"`
	Validators  bool     `json:"validators"`
	Pages       int      `json:"pages"`
	FirstWall   float64  `json:"first_wall_s"`
	SecondWall  float64  `json:"second_wall_s"`
	FirstBytes  uint64   `json:"first_bytes"`
	SecondBytes uint64   `json:"second_bytes"`
	New         uint64   `json:"new"`
	Changed     uint64   `json:"changed"`
	Unchanged   uint64   `json:"unchanged"`
	Gone        uint64   `json:"gone"`
	Exact       bool     `json:"exact"`
	Wrong       []string `json:"wrong,omitempty"`
}

// opener opens the store for one crawl; done closes it.
type opener func() (storage.Storage, storage.Queue, func(), error)

// noCleanup is the cleanup of stores that leave nothing behind.
func noCleanup() {}

func main() {
	base := flag.String("url", "", "the site's base URL (index.html below it)")
	root := flag.String("root", "", "the directory the server serves, edited between the crawls")
	kind := flag.String("store", "sqlite", "sqlite, redis or memory")
	db := flag.String("db", "", "sqlite: the state file (a new one)")
	redisAddr := flag.String("redis", "", "redis: the server's address")
	validators := flag.Bool("validators", true, "for the report: whether the server sends validators")
	par := flag.Int("p", 8, "threads (and per-host parallelism)")
	flag.Parse()
	open, cleanup, err := openerFor(*kind, *db, *redisAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := run(*base, *root, open, *par)
	cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res.Store, res.Validators = *kind, *validators
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(2)
	}
	if !res.Exact {
		os.Exit(1)
	}
}

// openerFor returns the opener of a store kind and what removes the store
// when the run is over.
func openerFor(kind, db, addr string) (opener, func(), error) {
	switch kind {
	case "memory":
		st, q := &storage.InMemoryStorage{}, &queue.InMemoryQueueStorage{}
		return func() (storage.Storage, storage.Queue, func(), error) { return st, q, func() {}, nil }, noCleanup, nil
	case "sqlite":
		return func() (storage.Storage, storage.Queue, func(), error) {
			s, err := sqlitestore.Open(db)
			if err != nil {
				return nil, nil, nil, err
			}
			return s, s, func() { s.Close() }, nil
		}, noCleanup, nil
	case "redis":
		opts := redisstore.Options{Addr: addr, Prefix: fmt.Sprintf("bench-recrawl-%d", rand.Uint64())}
		cleanup := func() {
			if s, err := redisstore.New(opts); err == nil {
				_ = s.Clear(context.Background())
				s.Close()
			}
		}
		return func() (storage.Storage, storage.Queue, func(), error) {
			s, err := redisstore.New(opts)
			if err != nil {
				return nil, nil, nil, err
			}
			return s, s, func() { s.Close() }, nil
		}, cleanup, nil
	}
	return nil, nil, fmt.Errorf("unknown -store %q", kind)
}

// crawl is one queue run over the store; it returns what each page was
// judged, by path below the site, and the Stats.
func crawl(base string, open opener, par int) (map[string]magpie.Change, magpie.Stats, time.Duration, error) {
	st, q, done, err := open()
	if err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	defer done()
	u, err := url.Parse(base)
	if err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	c := magpie.NewCollector(magpie.Recrawl(magpie.RecrawlPolicy{}), magpie.AllowedDomains(u.Hostname()),
		magpie.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err := c.SetStorage(st); err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: par}); err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	var mu sync.Mutex
	changes := map[string]magpie.Change{}
	note := func(r *magpie.Response) {
		mu.Lock()
		defer mu.Unlock()
		changes[strings.TrimPrefix(r.Request.URL.Path, "/")] = r.Change
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		if h := e.Attr("href"); strings.HasSuffix(strings.SplitN(h, "#", 2)[0], ".html") {
			_ = e.Request.Visit(h)
		}
	})
	c.OnScraped(note)
	c.OnError(func(r *magpie.Response, err error) {
		if r.Change != magpie.ChangeGone {
			fmt.Fprintf(os.Stderr, "%s: %v\n", r.Request.URL, err)
		}
		note(r)
	})
	qu, err := queue.New(par, q)
	if err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	ctx := context.Background()
	began := time.Now()
	// A recrawl: the due pages of the store, and the start URL, made due
	// (queued once).
	start := base + "/index.html"
	startDue := false
	for u, err := range c.DueURLs(ctx) {
		if err != nil {
			return nil, magpie.Stats{}, 0, err
		}
		if err := qu.AddURL(u); err != nil {
			return nil, magpie.Stats{}, 0, err
		}
		startDue = startDue || u == start
	}
	if !startDue {
		if err := c.MarkDue(start); err != nil {
			return nil, magpie.Stats{}, 0, err
		}
		if err := qu.AddURL(start); err != nil {
			return nil, magpie.Stats{}, 0, err
		}
	}
	if err := qu.RunContext(ctx, c); err != nil {
		return nil, magpie.Stats{}, 0, err
	}
	return changes, c.Stats(), time.Since(began), nil
}

func run(base, root string, open opener, par int) (result, error) {
	first, st1, wall1, err := crawl(base, open, par)
	if err != nil {
		return result{}, err
	}
	var pages []string
	for p := range first {
		if p != "index.html" {
			pages = append(pages, p)
		}
	}
	slices.Sort(pages)
	if len(pages) < 30 {
		return result{}, fmt.Errorf("the first crawl reached %d pages", len(pages))
	}
	rng := rand.New(rand.NewPCG(30, uint64(len(pages))))
	rng.Shuffle(len(pages), func(i, j int) { pages[i], pages[j] = pages[j], pages[i] })
	changed, deleted := pages[:20], pages[20:25]
	var added []string
	for i := range 5 {
		added = append(added, fmt.Sprintf("recrawl-new-%d.html", i))
	}
	if err := edit(root, changed, deleted, added); err != nil {
		return result{}, err
	}

	second, st2, wall2, err := crawl(base, open, par)
	if err != nil {
		return result{}, err
	}
	want := map[string]magpie.Change{}
	for p := range first {
		want[p] = magpie.ChangeUnchanged
	}
	for _, p := range changed {
		want[p] = magpie.ChangeChanged
	}
	for _, p := range deleted {
		want[p] = magpie.ChangeGone
	}
	for _, p := range added {
		want[p] = magpie.ChangeNew
	}
	res := result{Pages: len(first), FirstWall: wall1.Seconds(), SecondWall: wall2.Seconds(),
		FirstBytes: st1.Bytes, SecondBytes: st2.Bytes, New: st2.Recrawl.New, Changed: st2.Recrawl.Changed,
		Unchanged: st2.Recrawl.Unchanged, Gone: st2.Recrawl.Gone}
	for p, w := range want {
		if second[p] != w {
			res.Wrong = append(res.Wrong, fmt.Sprintf("%s: %q want %q", p, second[p], w))
		}
	}
	for p := range second {
		if _, ok := want[p]; !ok {
			res.Wrong = append(res.Wrong, p+": fetched, not in the site")
		}
	}
	slices.Sort(res.Wrong)
	res.Wrong = res.Wrong[:min(len(res.Wrong), 10)]
	wantStats := magpie.RecrawlStats{New: 5, Changed: 20, Gone: 5, Unchanged: uint64(len(first) - 25)}
	res.Exact = len(res.Wrong) == 0 && st2.Recrawl == wantStats
	return res, nil
}

// edit appends a comment to the changed pages (the first also links the
// added pages, which it writes), and deletes the deleted ones.
func edit(root string, changed, deleted, added []string) error {
	for i, p := range changed {
		extra := fmt.Sprintf("\n<!-- edited %d -->\n", i)
		if i == 0 {
			for _, a := range added {
				extra += `<a href="` + a + `">new</a>`
				if err := os.WriteFile(filepath.Join(root, a), []byte("<html><body>new page "+a+"</body></html>"), 0o644); err != nil {
					return err
				}
			}
		}
		f, err := os.OpenFile(filepath.Join(root, p), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(extra)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	for _, p := range deleted {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			return err
		}
	}
	return nil
}
