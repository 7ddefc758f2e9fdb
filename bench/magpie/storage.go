package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// Flags of the storage scenario's implementations. harness.Main parses the
// command line, so flags defined here are parsed with its own.
var (
	frontierTarget = flag.Int("frontier", 1_000_000, "frontier-*: stop once the frontier holds this many requests")
	dbPath         = flag.String("db", "", "frontier-sqlite: SQLite file (default: a new file in a temporary directory, removed after)")
	redisAddr      = flag.String("redis", "127.0.0.1:6379", "magpie-redis: Redis address")
	procs          = flag.Int("procs", 1, "magpie-redis: worker processes, each with -p threads")
	redisPrefix    = flag.String("prefix", "", "magpie-redis: key prefix (default: a new one, cleared after)")
	worker         = flag.Bool("worker", false, "magpie-redis: run as one worker process (set by the parent)")
)

// frontierPoll is how often the frontier implementations read the queue's
// length. Len counts rows in SQLite, so it is not free. A variable for the
// tests.
var frontierPoll = 500 * time.Millisecond

// crawlFrontierSQLite crawls with one sqlitestore.Store as the queue's
// storage and the collector's visited set, until the frontier reaches
// -frontier requests.
func crawlFrontierSQLite(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	path := *dbPath
	if path == "" {
		dir, err := os.MkdirTemp("", "magpie-frontier-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "crawl.db")
	}
	st, err := sqlitestore.Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	return crawlFrontier(ctx, cfg, n, st, st)
}

// crawlFrontierMemory is crawlFrontierSQLite with the in-memory queue (no
// size limit) and the collector's default in-memory visited set.
func crawlFrontierMemory(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlFrontier(ctx, cfg, n, &queue.InMemoryQueueStorage{}, nil)
}

// crawlFrontier runs queue.New(P, qs) until the frontier holds -frontier
// requests, then stops the run; n.Frontier is the largest length seen.
func crawlFrontier(ctx context.Context, cfg harness.Config, n *harness.Counters, qs storage.Queue, visited storage.Storage) error {
	c, err := newMagpie(ctx, cfg, n)
	if err != nil {
		return err
	}
	if visited != nil {
		if err := c.SetStorage(visited); err != nil {
			return err
		}
	}
	q, err := queue.New(cfg.P, qs)
	if err != nil {
		return err
	}
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var lenErr error
	wg.Go(func() {
		t := time.NewTicker(frontierPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			l, err := qs.Len(ctx)
			if err != nil {
				lenErr = err
				q.Stop()
				return
			}
			if total := int64(l.Total()); total > n.Frontier.Load() {
				n.Frontier.Store(total)
			}
			if n.Frontier.Load() >= int64(*frontierTarget) {
				q.Stop()
				return
			}
		}
	})
	err = q.RunContext(ctx, c)
	close(done)
	wg.Wait()
	if err == nil && lenErr != nil {
		err = fmt.Errorf("queue length: %w", lenErr)
	}
	if err == nil && n.Frontier.Load() < int64(*frontierTarget) {
		err = fmt.Errorf("crawl ended with a frontier of %d, short of -frontier %d", n.Frontier.Load(), *frontierTarget)
	}
	return err
}

// crawlQueueSQLite is crawlMagpieQueue with one sqlitestore.Store (in a new
// temporary directory) as the queue's storage and the collector's visited
// set: the durable crawl, in the throughput and politeness scenarios.
func crawlQueueSQLite(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	dir, err := os.MkdirTemp("", "magpie-queue-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(filepath.Join(dir, "crawl.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	return crawlQueueOn(ctx, cfg, n, st, st, cfg.Seed)
}

// crawlQueueAddSQLite is crawlQueueSQLite with the links added as Colly
// programs add them (crawlMagpieQueueAdd).
func crawlQueueAddSQLite(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	dir, err := os.MkdirTemp("", "magpie-queue-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(filepath.Join(dir, "crawl.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	return crawlQueueAddOn(ctx, cfg, n, st, st)
}

// crawlQueueAddRedis is crawlQueueRedis with the links added as Colly
// programs add them (crawlMagpieQueueAdd).
func crawlQueueAddRedis(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	st, _, done, err := openFreshRedis(ctx, "")
	if err != nil {
		return err
	}
	defer done()
	return crawlQueueAddOn(ctx, cfg, n, st, st)
}

// crawlQueueRedis is crawlMagpieQueue with one redisstore.Store (at -redis,
// under a new key prefix, cleared after) as the queue's storage and the
// visited set: one process of a distributed crawl.
func crawlQueueRedis(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	st, _, done, err := openFreshRedis(ctx, "")
	if err != nil {
		return err
	}
	defer done()
	return crawlQueueOn(ctx, cfg, n, st, st, cfg.Seed)
}

// openFreshRedis opens the Redis store at -redis under prefix (a new one
// when empty, returned) and clears its keys; done clears them again and
// closes it.
func openFreshRedis(ctx context.Context, prefix string) (st *redisstore.Store, _ string, done func(), err error) {
	if prefix == "" {
		prefix = "magpie-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	st, err = redisstore.New(redisOptions(prefix))
	if err != nil {
		return nil, "", nil, err
	}
	if err := st.Clear(ctx); err != nil {
		st.Close()
		return nil, "", nil, fmt.Errorf("clearing the crawl's keys in Redis at %s: %w", *redisAddr, err)
	}
	return st, prefix, func() {
		_ = st.Clear(context.WithoutCancel(ctx))
		st.Close()
	}, nil
}

// crawlQueueOn runs queue.New(P, qs) with visited as the collector's
// visited set, from seed (none when empty) until the queue is empty.
func crawlQueueOn(ctx context.Context, cfg harness.Config, n *harness.Counters, qs storage.Queue, visited storage.Storage, seed string) error {
	c, err := newMagpie(ctx, cfg, n)
	if err != nil {
		return err
	}
	if err := c.SetStorage(visited); err != nil {
		return err
	}
	q, err := queue.New(cfg.P, qs)
	if err != nil {
		return err
	}
	defer sampleHeld(ctx, n, c, q.Storage())()
	if seed != "" {
		if err := q.AddURL(seed); err != nil {
			return err
		}
	}
	if err := q.RunContext(ctx, c); err != nil {
		return err
	}
	return ctx.Err()
}

// crawlRedis is the multi-process crawl: the parent seeds a queue in Redis
// and starts -procs copies of this command with -worker, each crawling the
// shared queue with -p threads, one visited set for all. Its pages are the
// sum of the workers'; its wall time runs from the first start to the last
// exit.
func crawlRedis(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	if *procs < 1 {
		return errors.New("-procs must be at least 1")
	}
	if *worker {
		return redisWorker(ctx, cfg, n)
	}
	st, prefix, done, err := openFreshRedis(ctx, *redisPrefix)
	if err != nil {
		return err
	}
	defer done()
	q, err := queue.New(1, st)
	if err != nil {
		return err
	}
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	return runWorkers(ctx, cfg, n, "magpie-redis", prefix)
}

// runWorkers starts -procs copies of this command as workers of impl on the
// crawl under prefix and waits for them; their pages add up in n.
func runWorkers(ctx context.Context, cfg harness.Config, n *harness.Counters, impl, prefix string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-impl", impl, "-worker", "-redis", *redisAddr, "-redis-cluster", *redisCluster, "-prefix", prefix,
		"-ops-for", opsFor.String(), "-no-replica-wait=" + strconv.FormatBool(*noWait), "-p", strconv.Itoa(cfg.P), "-url", cfg.Seed, "-hosts", strings.Join(cfg.Hosts, ",")}
	if cfg.Polite {
		args = append(args, "-delay", cfg.Delay.String(), "-host-par", strconv.Itoa(cfg.HostPar))
	}
	n.Procs.Store(int64(*procs))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range *procs {
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			// Workers already started run the crawl to its end; wait for them.
			mu.Lock()
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
			mu.Unlock()
			break
		}
		wg.Go(func() {
			res, readErr := readResult(out)
			waitErr := cmd.Wait()
			n.Pages.Add(res.Pages)
			n.Errors.Add(res.Errors)
			mu.Lock()
			defer mu.Unlock()
			if err := errors.Join(readErr, waitErr); err != nil {
				errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
			}
			if res.Err != "" {
				errs = append(errs, fmt.Errorf("worker %d: %s", i, res.Err))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readResult reads a worker's result line, the last JSON line it prints.
func readResult(out interface{ Read([]byte) (int, error) }) (harness.Result, error) {
	var res harness.Result
	var last []byte
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line := sc.Bytes(); len(line) > 0 && line[0] == '{' {
			last = append(last[:0], line...)
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if last == nil {
		return res, errors.New("no result line")
	}
	return res, json.Unmarshal(last, &res)
}

// redisWorker is one worker process: the collector of the other
// implementations with the Redis store as its visited set, run by
// queue.New(P, store) until the shared queue is empty and no worker holds a
// lease.
func redisWorker(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	if *redisPrefix == "" {
		return errors.New("-worker needs -prefix")
	}
	st, err := redisstore.New(redisOptions(*redisPrefix))
	if err != nil {
		return err
	}
	defer st.Close()
	return crawlQueueOn(ctx, cfg, n, st, st, "")
}
