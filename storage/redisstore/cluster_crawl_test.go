package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// TestClusterSharedCrawl is the acceptance test of a crawl over Redis
// Cluster: three crawler processes share one crawl of a 20-host site on the
// cluster (3 masters, the frontier in 3 partitions, one per master) with
// SharedLimits and LimitRule{Parallelism: 1, Delay: 20ms}. Every page is
// fetched exactly once, no host ever has two requests in flight (measured
// by the servers), the starts Redis granted a host are at least Delay apart
// on the clock of the master holding the host's limiter keys, and the
// median gap between a host's arrivals at its server is at least Delay less
// 5 ms (single gaps carry the machine's scheduling jitter, see
// TestSharedPoliteness, and are logged).
func TestClusterSharedCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts crawler processes")
	}
	addrs := clusterAddrs(t)
	const hosts, pages = 20, 1000
	site := newPoliteSiteN(t, pages, hosts)
	st := newClusterStore(t, Options{})
	commands := func() int64 { return serverCommands(t, st.rdb.(*redis.ClusterClient)) }
	before := commands()
	begin := time.Now()
	grants := site.crawlOn(t, st, true, []string{"MAGPIE_POLITE_CLUSTER=" + strings.Join(addrs, ",")})
	t.Logf("%d pages over %d hosts in %v", pages, hosts, time.Since(begin).Round(time.Millisecond))
	// The figures of the README's capacity table: the crawlers' round
	// trips per page (commands, a script counting one, and pipelines, per
	// node) and the commands the masters ran per page (each command a
	// script runs counting one), SharedLimits included.
	t.Logf("per page: %.1f commands and %.2f pipelines sent by the crawlers; %.1f commands run by the masters",
		float64(site.calls)/pages, float64(site.pipes)/pages, float64(commands()-before)/pages)
	site.mu.Lock()
	defer site.mu.Unlock()
	for i := range pages {
		if n := site.counts[i]; n != 1 {
			t.Errorf("page %d fetched %d times, want 1", i, n)
		}
	}
	if len(grants) != hosts {
		t.Fatalf("grants for %d hosts, want %d", len(grants), hosts)
	}
	for host, at := range grants {
		slices.Sort(at)
		if len(at) != pages/hosts {
			t.Errorf("host %s: %d starts granted, want %d (one per page)", host, len(at), pages/hosts)
		}
		for i := 1; i < len(at); i++ {
			if gap := time.Duration(at[i]-at[i-1]) * time.Microsecond; gap < politeDelay {
				t.Errorf("host %s: starts %d and %d granted %v apart, want >= %v", host, i-1, i, gap, politeDelay)
			}
		}
	}
	for k := range site.srvs {
		arr := gaps(site.arrivals[k])
		if len(arr) != pages/hosts-1 {
			t.Fatalf("host %d: %d arrival gaps, want %d", k, len(arr), pages/hosts-1)
		}
		if med := pct(arr, 50); med < politeDelay-5*time.Millisecond {
			t.Errorf("host %d: median arrival gap %v, want >= %v", k, med, politeDelay-5*time.Millisecond)
		}
		if site.maxIn[k] > 1 {
			t.Errorf("host %d: %d requests in flight at once, want at most 1", k, site.maxIn[k])
		}
		if k < 3 {
			t.Logf("host %d: arrival gaps min %v p5 %v median %v", k, arr[0], pct(arr, 5), pct(arr, 50))
		}
	}
	if l, err := st.Len(t.Context()); err != nil || l.Total() != 0 {
		t.Errorf("queue after the crawl: Len() = %+v, %v, want empty", l, err)
	}
}

// TestClusterFailover kills (SIGKILL) the master holding one partition of
// the frontier while three crawler processes crawl a 20-host site over a
// cluster the test starts (3 masters, 3 replicas, node timeout 1 s). Its
// replica is promoted and the crawl runs to its end: every page is fetched
// (at least once: a master's last writes before it died, a lease or an
// acknowledgement, may be lost, so some pages may be fetched twice; pushes
// and acknowledgements wait for the replica, so no link is lost), and the
// queue is empty.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and crawler processes")
	}
	clusterAddrs(t) // runs where the cluster tests run; the cluster is its own
	tc := startTestCluster(t)
	const hosts, pages = 20, 600
	site := newPoliteSiteN(t, pages, hosts)
	site.reachAt, site.reached = pages/3, make(chan struct{})
	st, err := New(Options{ClusterAddrs: tc.addrs, Prefix: randomPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	victim, err := st.rdb.(*redis.ClusterClient).MasterForKey(t.Context(), st.parts[0].key("queue"))
	if err != nil {
		t.Fatal(err)
	}
	victimAddr := victim.Options().Addr
	killed := make(chan error, 1)
	begin := time.Now()
	go func() {
		select {
		case <-site.reached:
			t.Logf("killing master %s after %v", victimAddr, time.Since(begin).Round(time.Millisecond))
			killed <- tc.kill(victimAddr)
		case <-t.Context().Done():
			killed <- t.Context().Err()
		}
	}()
	site.crawlOn(t, st, false, []string{"MAGPIE_POLITE_CLUSTER=" + strings.Join(tc.addrs, ",")})
	t.Logf("%d pages over %d hosts in %v", pages, hosts, time.Since(begin).Round(time.Millisecond))
	select {
	case <-site.reached:
		if err := <-killed; err != nil {
			t.Fatalf("killing master %s: %v", victimAddr, err)
		}
	default:
		// The kill goroutine ends with the test's context.
		t.Fatalf("the crawl ended before %d fetches: no master was killed", site.reachAt)
	}
	site.mu.Lock()
	dups := 0
	for i := range pages {
		switch n := site.counts[i]; {
		case n == 0:
			t.Errorf("page %d never fetched", i)
		case n > 1:
			dups += n - 1
		}
	}
	site.mu.Unlock()
	t.Logf("master %s killed after %d fetches; %d duplicate fetches", victimAddr, pages/3, dups)
	// This Store sat idle through the failover: its first calls may still
	// go to the dead master, until its client has found the new one.
	var l storage.QueueLen
	if !eventually(t, 30*time.Second, func() bool { l, err = st.Len(t.Context()); return err == nil }) {
		t.Fatalf("Len() after the failover error = %v", err)
	}
	if l.Total() != 0 {
		t.Errorf("queue after the crawl: Len() = %+v, want empty", l)
	}
	if m, err := st.rdb.(*redis.ClusterClient).MasterForKey(t.Context(), st.parts[0].key("queue")); err != nil || m.Options().Addr == victimAddr {
		t.Errorf("partition 0 after the failover: master %v, %v; want the promoted replica", m.Options().Addr, err)
	}
}

// testCluster is a Redis Cluster of redis-server processes the test started.
type testCluster struct {
	addrs []string
	// mu guards procs.
	mu    sync.Mutex
	procs map[string]*exec.Cmd
}

// startTestCluster starts 6 redis-servers on free loopback ports (each
// with its cluster bus port, +10000, free too) and joins them into a
// cluster of 3 masters with one replica each, node timeout 1 s.
func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s required in CI: %v", bin, err)
			}
			t.Skipf("%s not found: %v", bin, err)
		}
	}
	dir := t.TempDir()
	tc := &testCluster{procs: map[string]*exec.Cmd{}}
	for _, port := range freeClusterPorts(t, 6) {
		p := strconv.Itoa(port)
		addr := "127.0.0.1:" + p
		cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", p, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes-"+p+".conf"), "--cluster-node-timeout", "1000",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, p+".log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tc.procs[addr] = cmd
		tc.addrs = append(tc.addrs, addr)
	}
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		for _, cmd := range tc.procs {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ctx := t.Context()
	for _, addr := range tc.addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		ok := eventually(t, 30*time.Second, func() bool { return c.Ping(ctx).Err() == nil })
		c.Close()
		if !ok {
			t.Fatalf("redis-server on %s did not start", addr)
		}
	}
	args := append([]string{"--cluster", "create"}, tc.addrs...)
	out, err := exec.CommandContext(ctx, "redis-cli", append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Ready: every node sees the cluster ok, and every master has its
	// replica in sync (a master killed before that has nobody to fail
	// over to).
	ready := eventually(t, 60*time.Second, func() bool {
		synced := 0
		for _, addr := range tc.addrs {
			c := redis.NewClient(&redis.Options{Addr: addr})
			info, err := c.ClusterInfo(ctx).Result()
			repl, err2 := c.Info(ctx, "replication").Result()
			c.Close()
			if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			if strings.Contains(repl, "master_link_status:up") {
				synced++
			}
		}
		return synced == 3
	})
	if !ready {
		t.Fatal("the test cluster did not become ready")
	}
	return tc
}

// kill sends SIGKILL to the redis-server at addr.
func (tc *testCluster) kill(addr string) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	cmd, ok := tc.procs[addr]
	if !ok {
		return fmt.Errorf("no server on %s", addr)
	}
	return cmd.Process.Kill()
}

// freeClusterPorts returns n loopback ports of 20000-29999 that are free,
// with their cluster bus ports (+10000) free too.
func freeClusterPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatal("no free port pairs for a cluster")
		}
		port := 20000 + rand.IntN(10000)
		if slices.Contains(ports, port) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		ln.Close()
		if err != nil {
			continue
		}
		bus.Close()
		ports = append(ports, port)
	}
	return ports
}

// serverCommands sums total_commands_processed over the cluster's masters.
func serverCommands(t *testing.T, cc *redis.ClusterClient) int64 {
	t.Helper()
	var total atomic.Int64
	err := cc.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return err
				}
				total.Add(n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}

// TestClusterPushWaitsForReplica: on a cluster, a push returns only once the
// replica of its partition's master has it. With the replica stopped
// (SIGSTOP: connected, silent) the push fails with ErrNotReplicated after
// the wait, rather than succeed on a write a failover could lose; the
// queue run would retry it. Once the replica answers again, pushes and
// acknowledgements succeed, and NoReplicaWait never waits.
func TestClusterPushWaitsForReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	clusterAddrs(t)
	tc := startTestCluster(t)
	ctx := t.Context()
	st, err := New(Options{ClusterAddrs: tc.addrs, Prefix: randomPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fast, err := New(Options{ClusterAddrs: tc.addrs, Prefix: st.prefix, NoReplicaWait: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	// An entry for a host of partition 0, whose master's replica is stopped.
	var data []byte
	for i := 0; ; i++ {
		if data = reqData(fmt.Sprintf("h%d.example", i), 0); st.partOf(data) == 0 {
			break
		}
	}
	master, err := st.rdb.(*redis.ClusterClient).MasterForKey(ctx, st.parts[0].key("queue"))
	if err != nil {
		t.Fatal(err)
	}
	repl, err := master.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	var port string
	for line := range strings.SplitSeq(repl, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "slave0:"); ok {
			for kv := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "port="); ok {
					port = v
				}
			}
		}
	}
	replica := tc.procs["127.0.0.1:"+port]
	if replica == nil {
		t.Fatalf("no replica of %s among the test's servers (INFO replication: %q)", master.Options().Addr, repl)
	}
	if err := replica.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = replica.Process.Signal(syscall.SIGCONT)
		}
	}()
	if err := st.Push(ctx, data); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Push with the replica stopped error = %v, want %v", err, ErrNotReplicated)
	}
	if err := fast.Push(ctx, data); err != nil {
		t.Errorf("Push with NoReplicaWait, the replica stopped: error = %v, want nil", err)
	}
	if err := replica.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	if err := st.Push(ctx, data); err != nil {
		t.Errorf("Push with the replica back error = %v, want nil", err)
	}
	es, err := st.Lease(ctx, 10, time.Minute)
	if err != nil || len(es) != 3 {
		t.Fatalf("Lease = %d entries, %v; want the 3 pushed (the failed push's entry was written, unconfirmed)", len(es), err)
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	if err := st.Ack(ctx, ids...); err != nil {
		t.Errorf("Ack error = %v", err)
	}
}

// TestClusterCrawlerKilled kills (SIGKILL) one of three crawler processes
// a third of the way through a crawl over the cluster: the others finish
// it, every page is fetched, and the only pages fetched twice are among
// those the dead process held. Its leases come back when they expire; the
// test does not wait the frontier's lease TTL (minutes) but moves the dead
// consumer's lease deadlines to now, as the clock would.
func TestClusterCrawlerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills crawler processes")
	}
	addrs := clusterAddrs(t)
	const hosts, pages = 20, 600
	site := newPoliteSiteN(t, pages, hosts)
	site.reachAt, site.reached = pages/3, make(chan struct{})
	st := newClusterStore(t, Options{})
	q, err := queue.New(1, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(site.url(0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	errs := make(chan error, 3)
	for p := range 3 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperPoliteCrawler$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAGPIE_POLITE_PREFIX="+st.prefix, fmt.Sprintf("MAGPIE_POLITE_NAME=proc%d", p),
			"MAGPIE_POLITE_SHARED=0", "MAGPIE_POLITE_CLUSTER="+strings.Join(addrs, ","))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		go func() {
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("proc%d: %w\n%s", p, err, out)
			}
			errs <- err
		}()
	}
	select {
	case <-site.reached:
	case err := <-errs:
		t.Fatalf("a crawler ended before the kill: %v", err)
	case <-ctx.Done():
		t.Fatal("the crawl did not reach the kill point")
	}
	victim := cmds[0]
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "proc0") {
		t.Fatalf("first crawler to end: %v, want proc0 killed", err)
	}
	held := expireConsumer(t, st, "-"+strconv.Itoa(victim.Process.Pid)+"-")
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("crawler process error = %v", err)
		}
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	dups := 0
	for i := range pages {
		switch n := site.counts[i]; {
		case n == 0:
			t.Errorf("page %d never fetched", i)
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("proc0 killed after %d fetches with %d entries pending; %d duplicate fetches", pages/3, held, dups)
	if dups > held {
		t.Errorf("%d duplicate fetches, want at most the %d entries the killed process had", dups, held)
	}
	if l, err := st.Len(t.Context()); err != nil || l.Total() != 0 {
		t.Errorf("queue after the crawl: Len() = %+v, %v, want empty", l, err)
	}
}

// expireConsumer moves the lease deadlines of the consumers whose names
// contain mark to now, in every partition of st, and returns how many
// entries those consumers had pending (held or released).
func expireConsumer(t *testing.T, st *Store, mark string) int {
	t.Helper()
	ctx := t.Context()
	n := 0
	for _, part := range st.parts {
		consumers, err := st.rdb.XInfoConsumers(ctx, part.key("queue"), group).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range consumers {
			if !strings.Contains(c.Name, mark) {
				continue
			}
			pend, err := st.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
				Stream: part.key("queue"), Group: group, Consumer: c.Name, Start: "-", End: "+", Count: 100000,
			}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pend {
				// Only leases still held: a released entry has no deadline.
				if err := st.rdb.ZAddXX(ctx, part.key("expiry"), redis.Z{Score: 0, Member: p.ID}).Err(); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	return n
}
