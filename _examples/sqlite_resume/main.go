// SQLite resume: crawl with the frontier and visited set in one SQLite file,
// get interrupted, and resume where the crawl stopped.
//
//	go run ./_examples/sqlite_resume                 # crawl, interrupt after 10 pages, resume, report
//	go run ./_examples/sqlite_resume -db crawl.db URL # crawl URL; press Ctrl-C, run again to resume
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

func main() {
	dbPath := flag.String("db", "", "the SQLite file (default: a new temporary file)")
	flag.Parse()

	start := flag.Arg(0)
	demo := start == ""
	if demo {
		srv := site.Start()
		defer srv.Close()
		start = srv.URL + "/page/1"
	}
	if *dbPath == "" {
		dir, err := os.MkdirTemp("", "magpie-resume-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		*dbPath = filepath.Join(dir, "crawl.db")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The first session stops itself after 10 pages in the demo, as a crash or a deploy would.
	interruptAfter := 0
	if demo {
		interruptAfter = 10
	}
	first, err := session(ctx, *dbPath, start, interruptAfter)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("session 1: %d pages, then interrupted\n", first)
	if !demo {
		fmt.Println("run the same command again to resume")
		return
	}
	second, err := session(ctx, *dbPath, start, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("session 2: %d pages, resumed from %s\n", second, *dbPath)
	twice := 0
	for _, n := range fetches {
		if n > 1 {
			twice++
		}
	}
	fmt.Printf("total: %d distinct pages of %d, %d fetched more than once\n", len(fetches), site.Pages, twice)
}

// fetches counts scrapes per URL across both sessions of the demo.
var (
	fetchesMu sync.Mutex
	fetches   = map[string]int{}
)

// session opens the store, crawls until the queue is empty (or until
// interruptAfter pages, when positive), and closes the store.
func session(ctx context.Context, dbPath, start string, interruptAfter int) (int, error) {
	_, statErr := os.Stat(dbPath)
	fresh := errors.Is(statErr, os.ErrNotExist)
	st, err := sqlitestore.Open(dbPath) // leases of a crashed process return to the queue here
	if err != nil {
		return 0, err
	}
	defer st.Close()

	q, err := queue.New(2, st)
	if err != nil {
		return 0, err
	}
	// Seed only a new crawl; a resumed one already has its frontier in the file.
	if fresh {
		if err := q.AddURL(start); err != nil {
			return 0, err
		}
	}

	u, err := url.Parse(start)
	if err != nil {
		return 0, err
	}
	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()))
	if err := c.SetStorage(st); err != nil { // visited set and cookies in the same file
		return 0, err
	}
	var pages atomic.Int64
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnScraped(func(r *magpie.Response) {
		fetchesMu.Lock()
		fetches[r.Request.URL.String()]++
		fetchesMu.Unlock()
		if n := pages.Add(1); interruptAfter > 0 && n == int64(interruptAfter) {
			q.Stop() // what is not finished stays in the file
		}
	})
	if err := q.RunContext(ctx, c); err != nil && !errors.Is(err, context.Canceled) {
		return int(pages.Load()), err
	}
	return int(pages.Load()), nil
}
