package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
)

var (
	redisCluster = flag.String("redis-cluster", "", "magpie-redis, magpie-redis-ops: comma-separated seed nodes of a Redis Cluster, used instead of -redis")
	opsFor       = flag.Duration("ops-for", 10*time.Second, "magpie-redis-ops: how long each worker runs")
	noWait       = flag.Bool("no-replica-wait", false, "magpie-redis, magpie-redis-ops: redisstore.Options.NoReplicaWait on a cluster")
)

// redisOptions opens the crawl under prefix on -redis-cluster when set,
// else on -redis.
func redisOptions(prefix string) redisstore.Options {
	if *redisCluster != "" {
		return redisstore.Options{ClusterAddrs: strings.Split(*redisCluster, ","), Prefix: prefix, NoReplicaWait: *noWait}
	}
	return redisstore.Options{Addr: *redisAddr, Prefix: prefix}
}

// opsBatch is how many entries each queue operation of magpie-redis-ops moves.
const opsBatch = 10

// opsHosts is how many hosts the entries of magpie-redis-ops are spread
// over (they decide the partition).
const opsHosts = 20

// redisOps measures the Redis queue without a crawl: -procs worker
// processes with -p goroutines each loop for -ops-for over Push(10
// entries for random hosts), Lease(10) and Ack of what was leased, on one
// shared queue. Its "pages" are the queue operations completed (calls, each
// moving up to 10 entries), so pages/s is queue operations per second.
func redisOps(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	if *procs < 1 {
		return errors.New("-procs must be at least 1")
	}
	if *worker {
		return redisOpsWorker(ctx, cfg, n)
	}
	_, prefix, done, err := openFreshRedis(ctx, *redisPrefix)
	if err != nil {
		return err
	}
	defer done()
	return runWorkers(ctx, cfg, n, "magpie-redis-ops", prefix)
}

func redisOpsWorker(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	st, err := redisstore.New(redisOptions(*redisPrefix))
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, *opsFor)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range cfg.P {
		wg.Go(func() {
			if err := opsLoop(ctx, st, n); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// opsLoop pushes, leases and acknowledges until ctx ends, counting calls.
func opsLoop(ctx context.Context, st *redisstore.Store, n *harness.Counters) error {
	data := make([][]byte, opsBatch)
	for ctx.Err() == nil {
		for i := range data {
			data[i] = fmt.Appendf(data[i][:0], `{"URL":"http://h%d.example/p/%d","Method":"GET"}`, rand.IntN(opsHosts), rand.Uint64())
		}
		if err := st.Push(ctx, data...); err != nil {
			return err
		}
		n.Pages.Add(1)
		es, err := st.Lease(ctx, opsBatch, time.Minute)
		if errors.Is(err, storage.ErrQueueEmpty) {
			n.Pages.Add(1)
			continue
		}
		if err != nil {
			return err
		}
		n.Pages.Add(1)
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.ID
		}
		if err := st.Ack(ctx, ids...); err != nil {
			return err
		}
		n.Pages.Add(1)
	}
	return nil
}
