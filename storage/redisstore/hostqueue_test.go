package redisstore

import (
	"context"
	"errors"
	"fmt"
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
// merges them in priority then push order, and one per-host limit counts
// the leases of both.
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
			// A limit of 2 holds over both lanes: p5 (hosted) and a (stream).
			es, err := s.LeaseHosts(ctx, now, 10, 2, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if d := entryDatas(es); !slices.Equal(d, []string{"p5", "a"}) {
				t.Errorf("LeaseHosts(10, perHost 2) = %q, want [p5 a]", d)
			}
			if _, err := s.LeaseHosts(ctx, now, 10, 2, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
				t.Errorf("LeaseHosts with host \"\" at its limit error = %v, want %v", err, storage.ErrQueueEmpty)
			}
			// One Ack of both kinds frees both slots.
			if err := s.Ack(ctx, leaseIDs(es)...); err != nil {
				t.Fatalf("Ack(a stream and a hosted lease) error = %v", err)
			}
			es, err = s.LeaseHosts(ctx, now, 10, 2, time.Hour)
			if err != nil || !slices.Equal(entryDatas(es), []string{"b", "c"}) {
				t.Errorf("LeaseHosts(10, perHost 2) after the Ack = %q, %v; want [b c]", entryDatas(es), err)
			}
			// Renew and Release take both kinds in one call as well.
			mixed := append(leaseIDs(es), "h0000000000001-000000:nope")
			if err := s.Renew(ctx, time.Hour, mixed...); !errors.Is(err, storage.ErrUnknownLease) {
				t.Errorf("Renew(held leases and an unknown one) error = %v, want %v", err, storage.ErrUnknownLease)
			}
			if err := s.ReleaseBatch(ctx, time.Time{}, leaseIDs(es)...); err != nil {
				t.Errorf("ReleaseBatch(b, c) error = %v", err)
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
