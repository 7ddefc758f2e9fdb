package redisstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
	"github.com/redis/go-redis/v9"
)

// clusterAddrs returns the seed nodes of the live Redis Cluster the tests
// use (3 masters, 3 replicas, started by .ci/run). Without one the tests
// skip locally and fail in CI.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	addrs := os.Getenv("MAGPIE_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("a Redis Cluster is required in CI: set MAGPIE_REDIS_CLUSTER_ADDRS")
		}
		t.Skip("MAGPIE_REDIS_CLUSTER_ADDRS is not set: start a Redis Cluster on 127.0.0.1 (see .ci/run) and export MAGPIE_REDIS_CLUSTER_ADDRS=127.0.0.1:7001,... to run the cluster tests")
	}
	return strings.Split(addrs, ",")
}

// newClusterStore opens a Store on a random prefix of the live cluster and
// deletes the prefix's keys at cleanup.
func newClusterStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = randomPrefix()
	}
	opts.ClusterAddrs = clusterAddrs(t)
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v) error = %v", opts, err)
	}
	t.Cleanup(func() {
		c, err := New(Options{ClusterAddrs: opts.ClusterAddrs, Prefix: opts.Prefix})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := c.Clear(context.Background()); err != nil {
			t.Errorf("cleanup Clear() error = %v", err)
		}
		c.Close()
		s.Close()
	})
	return s
}

func TestSlotHashing(t *testing.T) {
	// Reference values of Redis Cluster's key hashing (cluster spec).
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"{user1000}.following", keySlot("user1000")},
		{"foo{}{bar}", keySlot("foo{}{bar}")},
		{"foo{{bar}}zap", keySlot("{bar")},
		{"foo{bar}{zap}", keySlot("bar")},
	} {
		if got := keySlot(tt.key); got != tt.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	// Partition i of n sits in the i-th n-th of the slots, where
	// redis-cli --cluster create puts the i-th master.
	for _, n := range []int{2, 3, 6, 16} {
		for i := range n {
			key := "crawl:" + partitionTag("crawl", i, n) + "queue"
			if slot := keySlot(key); slot*n/clusterSlots != i {
				t.Errorf("partition %d of %d: %s in slot %d, outside its range", i, n, key, slot)
			}
		}
	}
	if a, b := partitionTag("{c}", 0, 3), partitionTag("{c}", 1, 3); keySlot("{c}:"+a+"queue") != keySlot("{c}:"+b+"queue") {
		t.Errorf("a tagged prefix must keep every partition in its slot: %s, %s", a, b)
	}
}

func TestEntryHost(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{`{"URL":"http://Example.com:8080/a?b#c","Method":"GET"}`, "example.com:8080"},
		{`{"URL":"https://user:pw@h.example/","Method":"GET"}`, "h.example"},
		{`{"Method":"GET","URL":"http://late.example/x"}`, "late.example"},
		{`{"URL":"http://q.example/\"x\""}`, "q.example"},
		{`{"URL":"http://amp.example/a?b=1\u0026c=2"}`, "amp.example"},
		{`{"URL":"http://esc\u0041.example/"}`, "esca.example"},
		{"a", ""},
		{"", ""},
		{`{"URL":"no-scheme"}`, ""},
	} {
		if got := entryHost([]byte(tt.data)); got != tt.want {
			t.Errorf("entryHost(%s) = %q, want %q", tt.data, got, tt.want)
		}
	}
}

// runConformance runs the storagetest suites on stores from open.
func runConformance(t *testing.T, open func(t testing.TB, opts Options) *Store) {
	storagetest.RunQueue(t, func(t *testing.T) storage.Queue { return open(t, Options{}) })
	storagetest.RunHostQueue(t, func(t *testing.T) storage.HostQueue { return open(t, Options{}) })
	storagetest.RunVisited(t, func(t *testing.T) storage.VisitedSet { return open(t, Options{}) })
	storagetest.RunCookies(t, func(t *testing.T) storage.CookieStore { return open(t, Options{}) })
	storagetest.RunPages(t, func(t *testing.T) storage.PageStore { return open(t, Options{}) })
	storagetest.RunVisitedQueue(t, func(t *testing.T) (storage.Storage, storage.Queue) {
		s := open(t, Options{})
		return s, s
	})
	var mu sync.Mutex
	prefixes := map[string]string{}
	reopen := func(t *testing.T, path string) *Store {
		mu.Lock()
		p, ok := prefixes[path]
		if !ok {
			p = randomPrefix()
			prefixes[path] = p
		}
		mu.Unlock()
		return open(t, Options{Prefix: p})
	}
	storagetest.RunQueueReopen(t, func(t *testing.T, path string) storage.Queue { return reopen(t, path) })
	storagetest.RunHostQueueReopen(t, func(t *testing.T, path string) storage.HostQueue { return reopen(t, path) })
}

// TestClusterConformance runs the conformance suite on the cluster, with
// the default partitions (one per master) and keys spread over the slots.
func TestClusterConformance(t *testing.T) {
	clusterAddrs(t)
	runConformance(t, func(t testing.TB, opts Options) *Store {
		s := newClusterStore(t, opts)
		if s.Partitions() != 3 || !s.cluster {
			t.Fatalf("cluster Store: %d partitions, spread %v; want 3 (one per master), true", s.Partitions(), s.cluster)
		}
		return s
	})
}

// TestPartitionsConformance runs the suite on one server with the frontier
// split into 4 partitions: the partitioned code without a cluster.
func TestPartitionsConformance(t *testing.T) {
	redisAddr(t)
	runConformance(t, func(t testing.TB, opts Options) *Store {
		opts.Partitions = 4
		return newTestStore(t, opts)
	})
}

// reqData is a marshalled request's start, enough for the partitioning.
func reqData(host string, i int) []byte {
	return fmt.Appendf(nil, `{"URL":"http://%s/p/%d","Method":"GET"}`, host, i)
}

// masterKeys lists, per master address, the keys of prefix it holds.
func masterKeys(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	cc := s.rdb.(*redis.ClusterClient)
	var mu sync.Mutex
	out := map[string][]string{}
	err := cc.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, s.prefix+":*").Result()
		mu.Lock()
		out[c.Options().Addr] = keys
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
