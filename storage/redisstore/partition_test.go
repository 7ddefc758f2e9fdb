package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// TestPartitionedQueue checks a frontier of 4 partitions on one server:
// hosts keep to one partition and their order, and every queue operation
// works on leases of several partitions at once.
func TestPartitionedQueue(t *testing.T) {
	redisAddr(t)
	testPartitionedQueue(t, func(t *testing.T, opts Options) *Store {
		opts.Partitions = 4
		return newTestStore(t, opts)
	})
}

// TestClusterPartitionedQueue is TestPartitionedQueue on the cluster, with
// its default partitions (one per master), and checks that the crawl's keys
// are spread over the masters.
func TestClusterPartitionedQueue(t *testing.T) {
	clusterAddrs(t)
	s := testPartitionedQueue(t, func(t *testing.T, opts Options) *Store { return newClusterStore(t, opts) })
	if _, err := s.AddVisited(t.Context(), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12); err != nil {
		t.Fatal(err)
	}
	queues, visited := 0, 0
	for addr, keys := range masterKeys(t, s) {
		q := slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "}:queue") })
		v := slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, s.prefix+":v:") })
		if q {
			queues++
		}
		if v {
			visited++
		}
		t.Logf("master %s: %d keys, a partition's stream: %v, visited shards: %v", addr, len(keys), q, v)
	}
	if queues != 3 || visited != 3 {
		t.Errorf("partition streams on %d masters and visited shards on %d, want 3 and 3", queues, visited)
	}
	// HostLimiter: one script over the host's two keys, in one slot.
	hl := s.HostLimiter(0)
	for _, host := range []string{"a.example", "b.example:8080", "c.example"} {
		release, wait, err := hl.Acquire(t.Context(), host, time.Hour, 1)
		if err != nil || wait != 0 {
			t.Fatalf("Acquire(%s) = %v, %v; want a start", host, wait, err)
		}
		release()
		if _, wait, err := hl.Acquire(t.Context(), host, time.Hour, 1); err != nil || wait <= 0 {
			t.Errorf("second Acquire(%s) within Delay = %v, %v; want a wait", host, wait, err)
		}
	}
}

func testPartitionedQueue(t *testing.T, open func(t *testing.T, opts Options) *Store) *Store {
	ctx := t.Context()
	s := open(t, Options{})
	other := open(t, Options{Prefix: s.prefix}) // a second process
	if other.Partitions() != s.Partitions() || s.Partitions() < 3 {
		t.Fatalf("Partitions() = %d and %d, want the same, at least 3", s.Partitions(), other.Partitions())
	}
	if _, err := NewFromClient(s.rdb, Options{Prefix: s.prefix, Partitions: s.Partitions() + 1}); !errors.Is(err, ErrLayoutMismatch) {
		t.Errorf("New with another partition count error = %v, want %v", err, ErrLayoutMismatch)
	}
	if _, err := NewFromClient(s.rdb, Options{Prefix: s.prefix, VisitedShards: 5}); !errors.Is(err, ErrLayoutMismatch) {
		t.Errorf("New with another visited shard count error = %v, want %v", err, ErrLayoutMismatch)
	}
	if o, err := NewFromClient(s.rdb, Options{Prefix: s.prefix, VisitedShards: DefaultVisitedShards}); err != nil {
		t.Errorf("New with the crawl's visited shard count error = %v, want nil", err)
	} else {
		o.Close()
	}

	const hosts, per = 12, 5
	var data [][]byte
	for i := range per {
		for h := range hosts {
			data = append(data, reqData(fmt.Sprintf("h%d.example:80", h), i))
		}
	}
	if err := s.Push(ctx, data...); err != nil {
		t.Fatalf("Push(%d entries) error = %v", len(data), err)
	}
	wantQueueLen(t, s, storage.QueueLen{Ready: hosts * per})

	// Lease everything in batches: each host's entries come from one
	// partition, in push order.
	partOfHost := map[string]string{}
	lastOfHost := map[string]int{}
	var ids []string
	for {
		es, err := s.Lease(ctx, 7, time.Hour)
		if errors.Is(err, storage.ErrQueueEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("Lease error = %v", err)
		}
		for _, e := range es {
			var h, i int
			if _, err := fmt.Sscanf(string(e.Data), `{"URL":"http://h%d.example:80/p/%d"`, &h, &i); err != nil {
				t.Fatalf("leased %q: %v", e.Data, err)
			}
			host := fmt.Sprint(h)
			part, _, _ := strings.Cut(e.ID, "/")
			if prev, ok := partOfHost[host]; ok && prev != part {
				t.Errorf("host %s leased from partitions %s and %s", host, prev, part)
			}
			partOfHost[host] = part
			if last, ok := lastOfHost[host]; ok && i <= last {
				t.Errorf("host %s: entry %d leased after %d", host, i, last)
			}
			lastOfHost[host] = i
			ids = append(ids, e.ID)
		}
	}
	if len(ids) != hosts*per {
		t.Fatalf("leased %d entries, want %d", len(ids), hosts*per)
	}
	used := map[string]bool{}
	for _, p := range partOfHost {
		used[p] = true
	}
	if len(used) < 2 {
		t.Errorf("the hosts use %d partitions, want several", len(used))
	}
	wantQueueLen(t, s, storage.QueueLen{Leased: hosts * per})

	// Half acknowledged in one call over every partition, with two IDs no
	// partition owns: those are reported, the rest acknowledged.
	acked, rest := ids[:30], ids[30:]
	err := s.Ack(ctx, append(slices.Clone(acked), "99/1-0:x", "1-0:x")...)
	if !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Ack(with foreign IDs) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	wantQueueLen(t, s, storage.QueueLen{Leased: 30})
	if err := s.Renew(ctx, time.Hour, rest...); err != nil {
		t.Errorf("Renew(%d leases) error = %v", len(rest), err)
	}
	if err := s.Ack(ctx, acked[0]); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Ack(acknowledged) error = %v, want %v", err, storage.ErrUnknownLease)
	}

	// Released leases go back, to whoever leases next.
	if err := s.ReleaseBatch(ctx, time.Time{}, rest[:10]...); err != nil {
		t.Errorf("ReleaseBatch error = %v", err)
	}
	if err := s.Release(ctx, rest[10], time.Time{}); err != nil {
		t.Errorf("Release error = %v", err)
	}
	wantQueueLen(t, s, storage.QueueLen{Ready: 11, Leased: 19})
	got, err := other.Lease(ctx, 100, time.Hour)
	if err != nil || len(got) != 11 {
		t.Fatalf("other Lease = %d entries, %v; want 11", len(got), err)
	}
	for _, e := range got {
		if e.Deliveries != 2 {
			t.Errorf("released entry %q: Deliveries %d, want 2", e.Data, e.Deliveries)
		}
	}

	// A lost Lease reply: what this consumer does not hold goes back.
	if err := s.ReleaseUnheld(ctx, rest[11:15]); err != nil {
		t.Errorf("ReleaseUnheld error = %v", err)
	}
	wantQueueLen(t, s, storage.QueueLen{Ready: 15, Leased: 15})
	if got, err := other.Lease(ctx, 100, time.Hour); err != nil || len(got) != 15 {
		t.Fatalf("other Lease after ReleaseUnheld = %d entries, %v; want 15", len(got), err)
	}
	// Close hands every lease of the closed Store back.
	if err := other.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	wantQueueLen(t, s, storage.QueueLen{Ready: 26, Leased: 4})

	// PushUnvisited over several partitions and visited shards.
	if _, err := s.AddVisited(ctx, 101, 103); err != nil {
		t.Fatal(err)
	}
	keys := []uint64{101, 102, 103, 104, 105}
	links := [][]byte{reqData("h1.example:80", 100), reqData("h2.example:80", 100), reqData("h3.example:80", 100),
		reqData("h4.example:80", 100), reqData("h5.example:80", 100)}
	pushed, err := s.PushUnvisited(ctx, keys, links)
	if want := []bool{false, true, false, true, true}; err != nil || !slices.Equal(pushed, want) {
		t.Errorf("PushUnvisited = %v, %v; want %v", pushed, err, want)
	}
	wantQueueLen(t, s, storage.QueueLen{Ready: 29, Leased: 4})
	return s
}

func wantQueueLen(t *testing.T, s *Store, want storage.QueueLen) {
	t.Helper()
	if got, err := s.Len(t.Context()); err != nil || got != want {
		t.Errorf("Len() = %+v, %v; want %+v", got, err, want)
	}
}

// TestPartitionsMaxSize: with partitions, MaxSize holds per partition.
func TestPartitionsMaxSize(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{Partitions: 4, MaxSize: 8}) // 2 per partition
	ctx := t.Context()
	if err := s.Push(ctx, reqData("a.example", 1), reqData("a.example", 2)); err != nil {
		t.Fatalf("Push(2 entries of one host) error = %v", err)
	}
	if err := s.Push(ctx, reqData("a.example", 3)); !errors.Is(err, storage.ErrQueueFull) {
		t.Errorf("Push(a third entry of the host) error = %v, want %v", err, storage.ErrQueueFull)
	}
	if _, err := s.PushUnvisited(ctx, []uint64{7}, [][]byte{reqData("a.example", 4)}); !errors.Is(err, storage.ErrQueueFull) {
		t.Errorf("PushUnvisited(a third entry of the host) error = %v, want %v", err, storage.ErrQueueFull)
	}
}

// TestPartitionFailing: a partition that fails (here its stream key holds
// a string, so its scripts fail) does not keep the others' entries from
// being leased, and its failure is reported, by the same Lease or the next
// one, so that a queue run reclaims what the failed call may have granted.
func TestPartitionFailing(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{Partitions: 4})
	ctx := t.Context()
	var data [][]byte
	for h := 0; len(data) < 30; h++ {
		if d := reqData(fmt.Sprintf("h%d.example", h), 0); s.partOf(d) != 2 {
			data = append(data, d)
		}
	}
	if err := s.Push(ctx, data...); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.Set(ctx, s.parts[2].key("queue"), "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	leased, failures := 0, 0
	for range 4 * s.Partitions() {
		es, err := s.Lease(ctx, 7, time.Minute)
		switch {
		case errors.Is(err, storage.ErrQueueEmpty):
		case err != nil:
			if !strings.Contains(err.Error(), "partition 2") {
				t.Errorf("Lease error = %v, want partition 2's", err)
			}
			failures++
		default:
			leased += len(es)
		}
	}
	if leased != len(data) || failures == 0 {
		t.Errorf("leased %d of %d entries with %d failures reported; want all, and the failure reported", leased, len(data), failures)
	}
}
