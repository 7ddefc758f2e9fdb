package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

func hostEntry(host string, prio int, data string) storage.HostEntry {
	return storage.HostEntry{Host: host, Priority: prio, Data: []byte(data)}
}

func entryDatas(es []storage.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Data)
	}
	return out
}

func leaseIDs(es []storage.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// Host "" has two lanes in a Store: the stream (Push, and PushHosted at
// priority 0) and the hosted entries of other priorities. LeaseHosts
// merges them in priority then push order, and neither lane has a per-host
// limit or a ready time (SetHostReady ignores host "").
func TestHostQueueEmptyHostLanes(t *testing.T) {
	redisAddr(t)
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("Partitions%d", parts), func(t *testing.T) {
			s := newTestStore(t, Options{Partitions: parts})
			ctx := t.Context()
			if err := s.Push(ctx, []byte("a"), []byte("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.PushHosted(ctx, hostEntry("", 5, "p5"), hostEntry("", -1, "m1"), hostEntry("", 0, "c")); err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx, []byte("d")); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			var got []storage.Entry
			for range 6 {
				es, err := s.LeaseHosts(ctx, now, 1, 0, time.Hour)
				if err != nil {
					t.Fatalf("LeaseHosts(1) after %q: %v", entryDatas(got), err)
				}
				got = append(got, es...)
			}
			if d := entryDatas(got); !slices.Equal(d, []string{"p5", "a", "b", "c", "d", "m1"}) {
				t.Errorf("LeaseHosts(1) x6 = %q, want [p5 a b c d m1]", d)
			}
			if err := s.ReleaseBatch(ctx, time.Time{}, leaseIDs(got)...); err != nil {
				t.Fatal(err)
			}
			if err := s.SetHostReady(ctx, map[string]time.Time{"": now.Add(time.Hour)}); err != nil {
				t.Fatalf("SetHostReady(\"\": +1h) error = %v", err)
			}
			head, err := s.Head(ctx, 10)
			if err != nil || len(head) != 6 {
				t.Fatalf("Head(10) = %d entries, %v; want 6", len(head), err)
			}
			for _, h := range head {
				if !h.HostReady.IsZero() {
					t.Errorf("Head(): %q HostReady = %v, want zero (host \"\" has no ready time)", h.Data, h.HostReady)
				}
			}
			// Neither the ready time nor a limit of 1 holds host "" back,
			// in either lane: p5 (hosted) and a (stream), then the rest.
			es, err := s.LeaseHosts(ctx, now, 2, 1, time.Hour)
			if err != nil || !slices.Equal(entryDatas(es), []string{"p5", "a"}) {
				t.Fatalf("LeaseHosts(2, perHost 1) = %q, %v; want [p5 a]", entryDatas(es), err)
			}
			more, err := s.LeaseHosts(ctx, now, 10, 1, time.Hour)
			if err != nil || !slices.Equal(entryDatas(more), []string{"b", "c", "d", "m1"}) {
				t.Errorf("LeaseHosts(10, perHost 1) with 2 of host \"\" leased = %q, %v; want [b c d m1]", entryDatas(more), err)
			}
			for _, e := range slices.Concat(es, more) {
				if !e.HostReady.IsZero() {
					t.Errorf("LeaseHosts(): %q HostReady = %v, want zero", e.Data, e.HostReady)
				}
			}
			// One Ack takes both kinds.
			if err := s.Ack(ctx, leaseIDs(es)...); err != nil {
				t.Fatalf("Ack(a stream and a hosted lease) error = %v", err)
			}
			es = more
			// Renew and Release take both kinds in one call as well.
			mixed := append(leaseIDs(es), "h0000000000001-000000:nope")
			if err := s.Renew(ctx, time.Hour, mixed...); !errors.Is(err, storage.ErrUnknownLease) {
				t.Errorf("Renew(held leases and an unknown one) error = %v, want %v", err, storage.ErrUnknownLease)
			}
			if err := s.ReleaseBatch(ctx, time.Time{}, leaseIDs(es)...); err != nil {
				t.Errorf("ReleaseBatch(b, c, d, m1) error = %v", err)
			}
			wantQueueLen(t, s, storage.QueueLen{Ready: 4})
		})
	}
}

// AckPages stores the page states of hosted leases it acknowledges, as it
// does for the stream's.
func TestHostQueueAckPages(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{})
	ctx := t.Context()
	if err := s.PushHosted(ctx, hostEntry("a.example", 1, "a1"), hostEntry("", 0, "plain")); err != nil {
		t.Fatal(err)
	}
	es, err := s.LeaseHosts(ctx, time.Now(), 10, 0, time.Hour)
	if err != nil || len(es) != 2 {
		t.Fatalf("LeaseHosts = %q, %v; want 2 entries", entryDatas(es), err)
	}
	var pages []storage.LeasePage
	for i, e := range es {
		pages = append(pages, storage.LeasePage{Lease: e.ID, Page: storage.Page{ID: uint64(100 + i), State: storage.PageState{ETag: string(e.Data)}}})
	}
	if err := s.AckPages(ctx, leaseIDs(es), pages); err != nil {
		t.Fatalf("AckPages error = %v", err)
	}
	wantQueueLen(t, s, storage.QueueLen{})
	states, found, err := s.GetPages(ctx, 100, 101)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		if !found[i] || states[i].ETag != string(e.Data) {
			t.Errorf("page of %q after AckPages = %+v, found %v; want its state stored", e.Data, states[i], found[i])
		}
	}
}

// A host waiting for its ready time costs LeaseHosts nothing once it was
// found waiting: the calls of a crawl whose hosts nearly all wait do as
// many Redis commands with 2,000 such hosts as with 20 (a store that
// looked through its hosts for the ready ones would do thousands). The
// hosts get their ready times while they are at their per-host limit, as
// in a crawl (SetHostReady after a fetch starts), and come back when
// their leases are acknowledged: the first LeaseHosts after that finds
// them waiting and sets them aside; the following ones are measured.
func TestLeaseHostsSkipsWaitingHosts(t *testing.T) {
	srv := startOwnRedis(t)
	calls := func(t *testing.T, hosts int) int64 {
		st, err := New(Options{Addr: srv.addr, Prefix: randomPrefix()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := t.Context()
		now := time.Now()
		var es []storage.HostEntry
		ready := map[string]time.Time{}
		for h := range hosts {
			host := fmt.Sprintf("h%d.example", h)
			es = append(es, hostEntry(host, h%3, host+"/1"), hostEntry(host, 0, host+"/2"), hostEntry(host, 0, host+"/3"))
			if h >= 10 {
				ready[host] = now.Add(time.Hour)
			}
		}
		if err := st.PushHosted(ctx, es...); err != nil {
			t.Fatal(err)
		}
		held, err := st.LeaseHosts(ctx, now, hosts, 1, time.Hour)
		if err != nil || len(held) != hosts {
			t.Fatalf("LeaseHosts(%d, perHost 1) = %d entries, %v; want one per host", hosts, len(held), err)
		}
		if err := st.SetHostReady(ctx, ready); err != nil {
			t.Fatal(err)
		}
		if err := st.Ack(ctx, leaseIDs(held)...); err != nil {
			t.Fatal(err)
		}
		lease := func() {
			got, err := st.LeaseHosts(ctx, now, 50, 1, time.Hour)
			if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
				t.Fatal(err)
			}
			for _, e := range got {
				if ready[e.Host] != (time.Time{}) {
					t.Fatalf("LeaseHosts handed out %q of a host ready in an hour", e.Data)
				}
			}
			if err := st.Ack(ctx, leaseIDs(got)...); err != nil {
				t.Fatal(err)
			}
		}
		lease()
		before := commandCalls(t, st.rdb)
		for range 5 {
			lease()
		}
		return commandCalls(t, st.rdb) - before
	}
	few, many := calls(t, 20), calls(t, 2000)
	t.Logf("5 LeaseHosts and Ack calls, 10 hosts ready: %d commands with 20 hosts, %d with 2,000", few, many)
	if many > few+20 {
		t.Errorf("LeaseHosts ran %d commands with 2,000 hosts waiting, %d with 20: it looks through waiting hosts", many, few)
	}
}

// commandCalls is the number of commands the server has run (scripts' own
// commands included).
func commandCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for line := range strings.SplitSeq(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		for f := range strings.SplitSeq(line[strings.IndexByte(line, ':')+1:], ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}

// A server restarted empty under a host queue: the store answers as an
// empty queue would, but says it was reset (CheckReset, and ReleaseUnheld,
// which a queue run calls after an outage), so that a run ends with
// storage.ErrStoreReset instead of a silent nil; writes made after the
// restart do not hide it.
func TestHostQueueRestartedEmpty(t *testing.T) {
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("Partitions%d", parts), func(t *testing.T) {
			srv := startOwnRedis(t)
			st, err := New(Options{Addr: srv.addr, Prefix: randomPrefix(), Partitions: parts})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			ctx := t.Context()
			now := time.Now()
			var es []storage.HostEntry
			for h := range 6 {
				for i := range 3 {
					es = append(es, hostEntry(fmt.Sprintf("h%d.example", h), i, fmt.Sprintf("h%d/%d", h, i)))
				}
			}
			if err := st.PushHosted(ctx, es...); err != nil {
				t.Fatal(err)
			}
			held, err := st.LeaseHosts(ctx, now, 4, 1, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SetHostReady(ctx, map[string]time.Time{"h0.example": now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := st.ReleaseUnheld(ctx, leaseIDs(held)); err != nil {
				t.Fatalf("ReleaseUnheld before the restart = %v, want nil", err)
			}
			if err := st.CheckReset(ctx); err != nil {
				t.Fatalf("CheckReset before the restart = %v, want nil", err)
			}

			srv.kill()
			srv.start(t)

			// The client reconnects on its next command; the first may
			// fail with the old connection.
			if !eventually(t, 10*time.Second, func() bool { return st.Init() == nil }) {
				t.Fatal("the Store did not reconnect")
			}
			if err := st.ReleaseUnheld(ctx, leaseIDs(held)); !errors.Is(err, storage.ErrStoreReset) {
				t.Errorf("ReleaseUnheld after the restart = %v, want %v", err, storage.ErrStoreReset)
			}
			if got, err := st.LeaseHosts(ctx, now, 10, 1, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
				t.Errorf("LeaseHosts after the restart = %q, %v; want %v", entryDatas(got), err, storage.ErrQueueEmpty)
			}
			if err := st.Ack(ctx, leaseIDs(held)...); !errors.Is(err, storage.ErrUnknownLease) {
				t.Errorf("Ack of leases held before the restart = %v, want %v", err, storage.ErrUnknownLease)
			}
			if err := st.Renew(ctx, time.Hour, leaseIDs(held)...); !errors.Is(err, storage.ErrUnknownLease) {
				t.Errorf("Renew of leases held before the restart = %v, want %v", err, storage.ErrUnknownLease)
			}
			// A run that goes on pushing and setting ready times does not
			// make the lost crawl look whole again.
			if err := st.PushHosted(ctx, hostEntry("h9.example", 0, "new"), hostEntry("", 0, "plain")); err != nil {
				t.Fatal(err)
			}
			if err := st.SetHostReady(ctx, map[string]time.Time{"h9.example": now, "": now}); err != nil {
				t.Fatal(err)
			}
			if err := st.CheckReset(ctx); !errors.Is(err, storage.ErrStoreReset) {
				t.Errorf("CheckReset after the restart and new writes = %v, want %v", err, storage.ErrStoreReset)
			}
			if err := st.ReleaseUnheld(ctx, nil); err != nil && !errors.Is(err, storage.ErrStoreReset) {
				t.Errorf("ReleaseUnheld after new writes = %v, want nil or %v", err, storage.ErrStoreReset)
			}
		})
	}
}

// TestHostQueueMemory measures the server memory of the host queue's
// per-host state with 10,000 hosts of 5 entries each, half of them
// waiting for their ready time and half holding one lease. It runs only
// with MAGPIE_REDIS_MEMTEST=1:
//
//	MAGPIE_REDIS_MEMTEST=1 go test -run HostQueueMemory -v ./storage/redisstore/
func TestHostQueueMemory(t *testing.T) {
	if os.Getenv("MAGPIE_REDIS_MEMTEST") == "" {
		t.Skip("set MAGPIE_REDIS_MEMTEST=1 to measure the host queue's memory (10,000 hosts)")
	}
	const hosts, per = 10_000, 5
	s := newTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now()
	before := usedMemory(t, s)
	ready := map[string]time.Time{}
	for h := 0; h < hosts; h += 1000 {
		var es []storage.HostEntry
		for k := h; k < h+1000; k++ {
			host := fmt.Sprintf("h%d.example.com", k)
			for i := range per {
				es = append(es, storage.HostEntry{Host: host, Priority: i % 2,
					Data: fmt.Appendf(nil, `{"URL":"https://%s/category/sub/item-%d.html","Method":"GET","Depth":3}`, host, i)})
			}
			if k%2 == 1 {
				ready[host] = now.Add(time.Hour)
			}
		}
		if err := s.PushHosted(ctx, es...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetHostReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := s.LeaseHosts(ctx, now, 1000, 1, time.Hour)
		if errors.Is(err, storage.ErrQueueEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	total := usedMemory(t, s) - before
	mem := func(keys ...string) int64 {
		var sum int64
		for _, k := range keys {
			n, err := s.rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			sum += n
		}
		return sum
	}
	var hostKeys int64
	for h := range hosts {
		hostKeys += mem(s.key(fmt.Sprintf("hq:h:h%d.example.com", h)))
	}
	shared := mem(s.key("hq:a"), s.key("hq:r"), s.key("hq:w"), s.key("hq:b"), s.key("hq:t"), s.key("hq:n"))
	entries := mem(s.key("hq:e"), s.key("hq:f"), s.key("hq:l"), s.key("hq:x"), s.key("hq:o:"+s.consumer))
	l, err := s.Len(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hosts x %d entries (%+v): per host, its sorted set %.0f bytes + its share of the host sets (hq:a r w b t n) %.0f bytes = %.0f bytes; "+
		"entry records and indexes %.0f bytes per entry; used_memory delta %d bytes = %.0f bytes per host",
		hosts, per, l, float64(hostKeys)/hosts, float64(shared)/hosts, float64(hostKeys+shared)/hosts,
		float64(entries)/(hosts*per), total, float64(total)/hosts)
}

// On a partitioned frontier a host's hosted entries share a partition with
// the entries Push appends for its URLs, and LeaseHosts keeps the order of
// hosts across partitions (Push's entries, host "" at priority 0, come
// after the hosted ones, of priorities 1 to 12).
func TestHostQueuePartitions(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{Partitions: 4})
	ctx := t.Context()
	const hosts = 12
	var es []storage.HostEntry
	for h := range hosts {
		host := fmt.Sprintf("h%d.example:80", h)
		es = append(es, storage.HostEntry{Host: host, Priority: h + 1, Data: reqData(host, 1)})
		if err := s.Push(ctx, reqData(host, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PushHosted(ctx, es...); err != nil {
		t.Fatal(err)
	}
	got, err := s.LeaseHosts(ctx, time.Now(), hosts, 0, time.Hour)
	if err != nil || len(got) != hosts {
		t.Fatalf("LeaseHosts(%d) = %d entries, %v", hosts, len(got), err)
	}
	used := map[string]bool{}
	for i, e := range got {
		if want := hosts - i; e.Priority != want {
			t.Errorf("LeaseHosts entry %d: %q of priority %d, want priority %d (best first across partitions)", i, e.Data, e.Priority, want)
		}
		part, _, _ := strings.Cut(e.ID, "/")
		used[part] = true
		if want := strconv.Itoa(s.partOf(e.Data)); part != want {
			t.Errorf("%q of host %s leased from partition %s, want %s, where Push puts its URLs", e.Data, e.Host, part, want)
		}
	}
	if len(used) < 2 {
		t.Errorf("the hosts use %d partitions, want several", len(used))
	}
	plain, err := s.Lease(ctx, 100, time.Hour)
	if err != nil || len(plain) != hosts {
		t.Fatalf("Lease(100) = %d entries, %v; want the %d pushed with Push", len(plain), err, hosts)
	}
	for _, e := range plain {
		part, _, _ := strings.Cut(e.ID, "/")
		if want := strconv.Itoa(s.partOf(e.Data)); part != want || e.Host != "" {
			t.Errorf("%q leased from partition %s with host %q, want %s and \"\"", e.Data, part, e.Host, want)
		}
	}
}

// TestPushUnvisitedHosted: the links of a page, checked against the
// visited set and pushed under their hosts and priorities; on one server
// in one script (a round trip), and all or none under MaxSize.
func TestPushUnvisitedHosted(t *testing.T) {
	redisAddr(t)
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"Server", Options{}},
		{"Partitions3", Options{Partitions: 3}},
		{"VisitedTTL", Options{VisitedTTL: time.Hour}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkPushUnvisitedHosted(t, newTestStore(t, tt.opts))
		})
	}
	t.Run("OneRoundTrip", func(t *testing.T) {
		s := newTestStore(t, Options{})
		ctx := t.Context()
		var calls callCounter
		s.rdb.AddHook(&calls)
		// The first call may load the script (EVALSHA, then EVAL).
		if _, err := s.PushUnvisitedHosted(ctx, []uint64{1}, []storage.HostEntry{hostEntry("a", 1, "a1")}); err != nil {
			t.Fatal(err)
		}
		cmds, pipes := calls.cmds.Load(), calls.pipes.Load()
		keys := []uint64{1, 2, 3, 4}
		es := []storage.HostEntry{hostEntry("a", 1, "again"), hostEntry("b", 2, "b1"), hostEntry("c", 0, "c1"), hostEntry("", 0, "plain")}
		pushed, err := s.PushUnvisitedHosted(ctx, keys, es)
		if err != nil || !slices.Equal(pushed, []bool{true, true, true, true}) {
			t.Fatalf("PushUnvisitedHosted() = %v, %v; want 4 pushed", pushed, err)
		}
		if c, p := calls.cmds.Load()-cmds, calls.pipes.Load()-pipes; c != 1 || p != 0 {
			t.Errorf("PushUnvisitedHosted(4 links of 4 hosts) took %d commands and %d pipelines, want 1 command", c, p)
		}
	})
	t.Run("MaxSize", func(t *testing.T) {
		s := newTestStore(t, Options{MaxSize: 3})
		ctx := t.Context()
		if _, err := s.AddVisited(ctx, 1); err != nil {
			t.Fatal(err)
		}
		es := []storage.HostEntry{hostEntry("a", 0, "a1"), hostEntry("a", 0, "a2"), hostEntry("b", 0, "b1")}
		// Three entries fit; a visited one does not count.
		if _, err := s.PushUnvisitedHosted(ctx, []uint64{1, 2, 3}, es); err != nil {
			t.Fatalf("PushUnvisitedHosted(2 unvisited in a queue of 3) error = %v", err)
		}
		_, err := s.PushUnvisitedHosted(ctx, []uint64{4, 5}, es[:2])
		if !errors.Is(err, storage.ErrQueueFull) {
			t.Errorf("PushUnvisitedHosted(2 more in a queue of 3 holding 2) error = %v, want %v", err, storage.ErrQueueFull)
		}
		wantQueueLen(t, s, storage.QueueLen{Ready: 2})
	})
}

// TestClusterPushUnvisitedHosted is TestPushUnvisitedHosted's check on
// the cluster, where keys and entries spread over the masters.
func TestClusterPushUnvisitedHosted(t *testing.T) {
	clusterAddrs(t)
	checkPushUnvisitedHosted(t, newClusterStore(t, Options{}))
}

// checkPushUnvisitedHosted: bad arguments push nothing; entries whose keys
// are visited are skipped and reported; the others are leased under their
// hosts and priorities; nothing is marked visited.
func checkPushUnvisitedHosted(t *testing.T, s *Store) {
	ctx := t.Context()
	if _, err := s.AddVisited(ctx, 2); err != nil {
		t.Fatal(err)
	}
	es := []storage.HostEntry{
		hostEntry("a.example", 1, "a1"), hostEntry("b.example", 5, "b1"), hostEntry("a.example", 7, "a2"),
		hostEntry("", 0, "plain"), hostEntry("", 4, "p4"),
	}
	keys := []uint64{1, 2, 3, 4, 5}
	if _, err := s.PushUnvisitedHosted(ctx, keys[:2], es); !errors.Is(err, storage.ErrLengthMismatch) {
		t.Errorf("PushUnvisitedHosted(2 keys, 5 entries) error = %v, want %v", err, storage.ErrLengthMismatch)
	}
	bad := append(slices.Clone(es), hostEntry("c.example", math.MaxInt32+1, "c1"))
	if _, err := s.PushUnvisitedHosted(ctx, append(slices.Clone(keys), 6), bad); !errors.Is(err, storage.ErrPriorityRange) {
		t.Errorf("PushUnvisitedHosted(priority 2^31) error = %v, want %v", err, storage.ErrPriorityRange)
	}
	wantQueueLen(t, s, storage.QueueLen{})
	pushed, err := s.PushUnvisitedHosted(ctx, keys, es)
	if want := []bool{true, false, true, true, true}; err != nil || !slices.Equal(pushed, want) {
		t.Fatalf("PushUnvisitedHosted() = %v, %v; want %v (key 2 is visited)", pushed, err, want)
	}
	for _, k := range []uint64{1, 3} {
		if seen, err := s.IsVisited(k); err != nil || seen {
			t.Errorf("IsVisited(%d) after PushUnvisitedHosted = %v, %v; want false (it marks nothing)", k, seen, err)
		}
	}
	got, err := s.LeaseHosts(ctx, time.Now(), 10, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, e := range got {
		desc = append(desc, fmt.Sprintf("%s:%d:%s", e.Host, e.Priority, e.Data))
	}
	if want := []string{"a.example:7:a2", ":4:p4", "a.example:1:a1", ":0:plain"}; !slices.Equal(desc, want) {
		t.Errorf("LeaseHosts() after PushUnvisitedHosted = %q, want %q", desc, want)
	}
}

// TestLeaseHostReady: Lease, which ignores hosts' ready times, still sets
// each entry's Entry.HostReady to its host's stored ready time (zero when
// none), as LeaseHosts does, on one server and on partitions.
func TestLeaseHostReady(t *testing.T) {
	redisAddr(t)
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("Partitions%d", parts), func(t *testing.T) {
			s := newTestStore(t, Options{Partitions: parts})
			ctx := t.Context()
			at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			if err := s.PushHosted(ctx, hostEntry("a.example", 0, "a1"), hostEntry("b.example", 2, "b1"), hostEntry("a.example", 3, "a2")); err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx, []byte("plain")); err != nil {
				t.Fatal(err)
			}
			if err := s.SetHostReady(ctx, map[string]time.Time{"a.example": at}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Lease(ctx, 10, time.Hour)
			if err != nil || len(got) != 4 {
				t.Fatalf("Lease(10) = %q, %v; want 4 entries", entryDatas(got), err)
			}
			for _, e := range got {
				want := time.Time{}
				if e.Host == "a.example" {
					want = at
				}
				if !e.HostReady.Equal(want) {
					t.Errorf("Lease(): %q of host %q HostReady = %v, want %v", e.Data, e.Host, e.HostReady, want)
				}
			}
		})
	}
}
