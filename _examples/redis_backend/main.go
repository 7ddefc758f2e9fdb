// Redis backend: several worker processes share one crawl through Redis — one
// queue, one visited set — and every page is fetched once in all.
//
//	go run ./_examples/redis_backend [-redis 127.0.0.1:6379] [-workers 3] [URL]
//
// It needs a Redis server (6.2 or newer). Without a URL it serves a small
// site on 127.0.0.1 itself; it then starts -workers copies of itself as
// separate processes, each crawling from the shared queue.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/redisstore"
)

func main() {
	addr := flag.String("redis", envOr("MAGPIE_REDIS_ADDR", "127.0.0.1:6379"), "Redis address")
	workers := flag.Int("workers", 3, "worker processes")
	prefix := flag.String("prefix", "", "key prefix of the crawl (default: a new one)")
	worker := flag.Bool("worker", false, "run as one worker (used by the parent)")
	flag.Parse()

	if *worker {
		n, err := crawl(*addr, *prefix, flag.Arg(0))
		if err != nil {
			log.Fatalf("worker %d: %v", os.Getpid(), err)
		}
		fmt.Printf("worker %d fetched %d pages\n", os.Getpid(), n)
		return
	}

	start := flag.Arg(0)
	if start == "" {
		srv := site.Start()
		defer srv.Close()
		start = srv.URL + "/page/1"
	}
	if *prefix == "" {
		*prefix = "magpie-example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	st, err := redisstore.New(redisstore.Options{Addr: *addr, Prefix: *prefix})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := st.Len(ctx); err != nil {
		log.Fatalf("cannot reach Redis at %s (start one, or pass -redis): %v", *addr, err)
	}
	defer func() { _ = st.Clear(context.Background()) }()

	q, err := queue.New(1, st)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.AddURL(start); err != nil {
		log.Fatal(err)
	}

	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	procs := make([]*exec.Cmd, *workers)
	for i := range procs {
		cmd := exec.Command(self, "-worker", "-redis", *addr, "-prefix", *prefix, start)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		procs[i] = cmd
	}
	var failed error
	for _, cmd := range procs {
		failed = errors.Join(failed, cmd.Wait())
	}
	if failed != nil {
		log.Fatal(failed)
	}
	fmt.Println("all workers done; the shared queue is empty")
}

// crawl is one worker: it crawls from the shared queue until it is empty and
// no worker holds a lease, and returns how many pages it fetched itself.
func crawl(addr, prefix, start string) (int64, error) {
	st, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: prefix})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	u, err := url.Parse(start)
	if err != nil {
		return 0, err
	}
	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()))
	if err := c.SetStorage(st); err != nil { // one visited set for all workers
		return 0, err
	}
	var pages atomic.Int64
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnScraped(func(r *magpie.Response) {
		pages.Add(1)
		fmt.Printf("  %d: %s\n", os.Getpid(), strings.TrimPrefix(r.Request.URL.String(), "http://"))
	})
	q, err := queue.New(2, st)
	if err != nil {
		return 0, err
	}
	err = q.Run(c)
	return pages.Load(), err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
