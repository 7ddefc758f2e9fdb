package storage_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

func TestMemoryQueuePushHostedMaxSize(t *testing.T) {
	ctx := t.Context()
	q := storage.NewMemoryQueue(3)
	defer q.Close()
	if err := q.PushHosted(ctx, storage.HostEntry{Host: "a", Data: []byte("a1")}, storage.HostEntry{Host: "b", Data: []byte("b1")}); err != nil {
		t.Fatalf("PushHosted(2) error = %v, want nil", err)
	}
	err := q.PushHosted(ctx, storage.HostEntry{Host: "a", Data: []byte("a2")}, storage.HostEntry{Host: "c", Data: []byte("c1")})
	if !errors.Is(err, storage.ErrQueueFull) {
		t.Fatalf("PushHosted(2) beyond MaxSize 3 error = %v, want %v", err, storage.ErrQueueFull)
	}
	if l, _ := q.Len(ctx); l != (storage.QueueLen{Ready: 2}) {
		t.Fatalf("Len() after a refused PushHosted = %+v, want Ready 2 (all or none)", l)
	}
	es, err := q.LeaseHosts(ctx, time.Now(), 10, 1, time.Minute)
	if err != nil || !slices.Equal(data(es), []string{"a1", "b1"}) {
		t.Fatalf("LeaseHosts() = %q, %v; want [a1 b1]", data(es), err)
	}
}

// TestMemoryQueueHostsForgotten: a host with no entries is kept while its
// ready time is to come, then forgotten, so that the hosts' state stays
// linear in the hosts with work.
func TestMemoryQueueHostsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := storage.NewMemoryQueue(0)
		defer q.Close()
		const hosts = 1000
		for i := range hosts {
			if err := q.PushHosted(ctx, storage.HostEntry{Host: fmt.Sprint(i), Data: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		es, err := q.LeaseHosts(ctx, time.Now(), hosts, 1, time.Hour)
		if err != nil || len(es) != hosts {
			t.Fatalf("LeaseHosts(%d) = %d entries, %v; want %d", hosts, len(es), err, hosts)
		}
		ready := make(map[string]time.Time, hosts)
		for _, e := range es {
			ready[e.Host] = time.Now().Add(time.Minute)
			if err := q.Ack(ctx, e.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.SetHostReady(ctx, ready); err != nil {
			t.Fatal(err)
		}
		if n := storage.MemoryQueueHosts(q); n != hosts {
			t.Fatalf("hosts kept with a ready time to come = %d, want %d", n, hosts)
		}
		// Within the minute the ready times hold for pushed entries.
		time.Sleep(30 * time.Second)
		if err := q.PushHosted(ctx, storage.HostEntry{Host: "7", Data: []byte("again")}); err != nil {
			t.Fatal(err)
		}
		if es, err := q.LeaseHosts(ctx, time.Now(), 1, 1, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("LeaseHosts() before host 7's ready time = %q, %v; want %v", data(es), err, storage.ErrQueueEmpty)
		}
		time.Sleep(31 * time.Second)
		if _, err := q.Len(ctx); err != nil {
			t.Fatal(err)
		}
		if n := storage.MemoryQueueHosts(q); n != 1 {
			t.Errorf("hosts kept after their ready times passed = %d, want 1 (the one with an entry)", n)
		}
		es, err = q.LeaseHosts(ctx, time.Now(), 1, 1, time.Hour)
		if err != nil || string(es[0].Data) != "again" {
			t.Fatalf("LeaseHosts() after host 7's ready time = %q, %v; want [again]", data(es), err)
		}
		if err := q.Ack(ctx, es[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := storage.MemoryQueueHosts(q); n != 0 {
			t.Errorf("hosts kept with no entries and no ready time to come = %d, want 0", n)
		}
	})
}

// TestMemoryQueueIdleHostPushed: a host kept only for its ready time and
// then given entries (before any LeaseHosts) is one host with them, not
// forgotten when its ready time passes.
func TestMemoryQueueIdleHostPushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := storage.NewMemoryQueue(0)
		defer q.Close()
		if err := q.SetHostReady(ctx, map[string]time.Time{"h": time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := q.PushHosted(ctx, storage.HostEntry{Host: "h", Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		if _, err := q.Len(ctx); err != nil { // forgets hosts whose time passed
			t.Fatal(err)
		}
		if err := q.PushHosted(ctx, storage.HostEntry{Host: "h", Data: []byte("y")}); err != nil {
			t.Fatal(err)
		}
		es, err := q.LeaseHosts(ctx, time.Now(), 10, 1, time.Hour)
		if err != nil || !slices.Equal(data(es), []string{"x"}) {
			t.Fatalf("LeaseHosts(10, perHost 1) = %q, %v; want [x] (one host)", data(es), err)
		}
	})
}

// TestMemoryQueueHostsModel runs random operations on a MemoryQueue and on
// a plain model of the HostQueue contract (every operation a scan), with
// virtual time, and compares every answer. It covers what the conformance
// suite does not reach: switching between Lease and LeaseHosts, hosts
// moving between ready, waiting, full and forgotten, limits that change
// between calls, and nows out of order.
func TestMemoryQueueHostsModel(t *testing.T) {
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed) })
		})
	}
}

func runModel(t *testing.T, seed uint64) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 39))
	q := storage.NewMemoryQueue(0)
	defer q.Close()
	m := &model{ready: map[string]time.Time{}}
	hosts := []string{"", "a", "b", "c", "d"}
	prios := []int{-1, 0, 0, 0, 2, 5}
	type held struct{ real, model string }
	var leases []held
	n := 0
	nextData := func() []byte { n++; return fmt.Appendf(nil, "e%d", n) }
	errKind := func(err error) string {
		switch {
		case err == nil:
			return "nil"
		case errors.Is(err, storage.ErrQueueEmpty):
			return "empty"
		case errors.Is(err, storage.ErrUnknownLease):
			return "unknown"
		}
		return err.Error()
	}
	pick := func() []held {
		var out []held
		for _, l := range leases {
			if r.IntN(3) == 0 {
				out = append(out, l)
			}
		}
		return out
	}
	record := func(es []storage.Entry, ms []*mEntry) {
		for i := range es {
			leases = append(leases, held{es[i].ID, ms[i].id})
		}
	}
	perHost := int(seed%4) - 1
	for step := range 600 {
		clock := time.Now()
		op := r.IntN(12)
		where := fmt.Sprintf("step %d (op %d)", step, op)
		switch op {
		case 0: // Push
			var ds [][]byte
			for range 1 + r.IntN(3) {
				ds = append(ds, nextData())
			}
			if err := q.Push(ctx, ds...); err != nil {
				t.Fatalf("%s: Push error = %v", where, err)
			}
			for _, d := range ds {
				m.push("", 0, d)
			}
		case 1, 2: // PushHosted
			var hs []storage.HostEntry
			for range 1 + r.IntN(4) {
				hs = append(hs, storage.HostEntry{Host: hosts[r.IntN(len(hosts))], Priority: prios[r.IntN(len(prios))], Data: nextData()})
			}
			if err := q.PushHosted(ctx, hs...); err != nil {
				t.Fatalf("%s: PushHosted error = %v", where, err)
			}
			for _, h := range hs {
				m.push(h.Host, h.Priority, h.Data)
			}
		case 3: // Lease
			k, ttl := 1+r.IntN(4), time.Duration(1+r.IntN(90))*time.Second
			es, err := q.Lease(ctx, k, ttl)
			ms := m.lease(clock, k, ttl)
			if errKind(err) != errKind(emptyIf(ms)) || !sameEntries(es, ms) {
				t.Fatalf("%s: Lease(%d) = %s, %v; model %s", where, k, show(es), err, showM(ms))
			}
			record(es, ms)
		case 4, 5: // LeaseHosts
			now := clock.Add([]time.Duration{0, 0, 30 * time.Second, 2 * time.Minute}[r.IntN(4)])
			k := 1 + r.IntN(5)
			if r.IntN(20) == 0 { // a run passes one perHost; a change re-places every host
				perHost = r.IntN(5) - 1
			}
			ttl := time.Duration(1+r.IntN(90)) * time.Second
			es, err := q.LeaseHosts(ctx, now, k, perHost, ttl)
			ms := m.leaseHosts(clock, now, k, perHost, ttl)
			if errKind(err) != errKind(emptyIf(ms)) || !sameEntries(es, ms) {
				t.Fatalf("%s: LeaseHosts(+%v, %d, perHost %d) = %s, %v; model %s", where, now.Sub(clock), k, perHost, show(es), err, showM(ms))
			}
			for i, e := range es {
				// A ready time already passed may be kept or forgotten.
				want := m.ready[ms[i].host]
				if !want.After(clock) {
					want = time.Time{}
				}
				if got := e.HostReady; (got.After(clock) || !want.IsZero()) && !got.Equal(want) {
					t.Fatalf("%s: LeaseHosts() entry %q HostReady = %v, model %v", where, e.Data, got, want)
				}
			}
			record(es, ms)
		case 6: // Ack
			ls := pick()
			var rids, mids []string
			for _, l := range ls {
				rids, mids = append(rids, l.real), append(mids, l.model)
			}
			err := q.Ack(ctx, rids...)
			if want := m.ack(clock, mids); errKind(err) != errKind(want) {
				t.Fatalf("%s: Ack error = %v, model %v", where, err, want)
			}
		case 7: // Release or ReleaseBatch
			ls := pick()
			var nb time.Time
			if r.IntN(2) == 0 {
				nb = clock.Add(time.Duration(r.IntN(60)) * time.Second)
			}
			var rids, mids []string
			for _, l := range ls {
				rids, mids = append(rids, l.real), append(mids, l.model)
			}
			err := q.ReleaseBatch(ctx, nb, rids...)
			if want := m.release(clock, nb, mids); errKind(err) != errKind(want) {
				t.Fatalf("%s: ReleaseBatch error = %v, model %v", where, err, want)
			}
		case 8: // SetHostReady
			ready := map[string]time.Time{}
			for range 1 + r.IntN(3) {
				ready[hosts[r.IntN(len(hosts))]] = clock.Add([]time.Duration{-time.Minute, 0, 30 * time.Second, 90 * time.Second, 3 * time.Minute}[r.IntN(5)])
			}
			if err := q.SetHostReady(ctx, ready); err != nil {
				t.Fatalf("%s: SetHostReady error = %v", where, err)
			}
			m.setReady(ready)
		case 9: // time passes
			time.Sleep([]time.Duration{time.Second, 5 * time.Second, 20 * time.Second, 70 * time.Second}[r.IntN(4)])
			synctest.Wait()
		case 10: // Len
			l, err := q.Len(ctx)
			if want := m.len(clock); err != nil || l != want {
				t.Fatalf("%s: Len() = %+v, %v; model %+v", where, l, err, want)
			}
		case 11: // Head
			k := 1 + r.IntN(20)
			hs, err := q.Head(ctx, k)
			want := m.head(clock, k)
			if err != nil || !sameHead(hs, want, clock) {
				t.Fatalf("%s: Head(%d) = %s, %v; model %s", where, k, showHead(hs), err, showHead(want))
			}
		}
	}
}

func emptyIf(ms []*mEntry) error {
	if len(ms) == 0 {
		return storage.ErrQueueEmpty
	}
	return nil
}

func sameEntries(es []storage.Entry, ms []*mEntry) bool {
	if len(es) != len(ms) {
		return false
	}
	for i, e := range es {
		m := ms[i]
		if string(e.Data) != string(m.data) || e.Host != m.host || e.Priority != m.prio || e.Deliveries != m.deliveries {
			return false
		}
	}
	return true
}

// sameHead compares Head answers; a host's ready time already passed may be
// kept or forgotten (shown as zero).
func sameHead(a, b []storage.HeadEntry, clock time.Time) bool {
	eff := func(t time.Time) time.Time {
		if !t.After(clock) {
			return time.Time{}
		}
		return t
	}
	return slices.EqualFunc(a, b, func(x, y storage.HeadEntry) bool {
		return x.Host == y.Host && x.Priority == y.Priority && string(x.Data) == string(y.Data) &&
			x.NotBefore.Equal(y.NotBefore) && eff(x.HostReady).Equal(eff(y.HostReady))
	})
}

func show(es []storage.Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%s@%q/%d#%d", e.Data, e.Host, e.Priority, e.Deliveries))
	}
	return fmt.Sprint(s)
}

func showM(ms []*mEntry) string {
	var s []string
	for _, e := range ms {
		s = append(s, fmt.Sprintf("%s@%q/%d#%d", e.data, e.host, e.prio, e.deliveries))
	}
	return fmt.Sprint(s)
}

func showHead(hs []storage.HeadEntry) string {
	var s []string
	for _, h := range hs {
		s = append(s, fmt.Sprintf("%s@%q/%d nb=%v hr=%v", h.Data, h.Host, h.Priority, h.NotBefore.Unix(), h.HostReady.Unix()))
	}
	return fmt.Sprint(s)
}

// model is the HostQueue contract as a list scanned by every operation.
type model struct {
	seq   int
	es    []*mEntry
	ready map[string]time.Time
}

type mEntry struct {
	seq        int
	host       string
	prio       int
	data       []byte
	deliveries int
	leased     bool
	at         time.Time // not-before, or lease deadline while leased
	id         string
}

func better(a, b *mEntry) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.seq < b.seq
}

func (m *model) expire(clock time.Time) {
	for _, e := range m.es {
		if e.leased && !e.at.After(clock) {
			e.leased, e.at, e.id = false, time.Time{}, ""
		}
	}
}

func (m *model) pending(e *mEntry, clock time.Time) bool { return !e.leased && !e.at.After(clock) }

func (m *model) push(host string, prio int, data []byte) {
	m.seq++
	m.es = append(m.es, &mEntry{seq: m.seq, host: host, prio: prio, data: data})
}

func (m *model) take(e *mEntry, clock time.Time, ttl time.Duration) *mEntry {
	e.deliveries++
	e.leased, e.at = true, clock.Add(ttl)
	e.id = fmt.Sprintf("%d.%d", e.seq, e.deliveries)
	c := *e
	return &c
}

func (m *model) lease(clock time.Time, n int, ttl time.Duration) []*mEntry {
	m.expire(clock)
	var out []*mEntry
	for _, e := range m.es {
		if len(out) < n && m.pending(e, clock) {
			out = append(out, m.take(e, clock, ttl))
		}
	}
	return out
}

func (m *model) leaseHosts(clock, now time.Time, n, perHost int, ttl time.Duration) []*mEntry {
	m.expire(clock)
	var out []*mEntry
	for len(out) < n {
		held := map[string]int{}
		for _, e := range m.es {
			if e.leased {
				held[e.host]++
			}
		}
		var best *mEntry
		for _, e := range m.es {
			if !m.pending(e, clock) || m.ready[e.host].After(now) || (perHost > 0 && e.host != "" && held[e.host] >= perHost) {
				continue
			}
			if best == nil || better(e, best) {
				best = e
			}
		}
		if best == nil {
			break
		}
		out = append(out, m.take(best, clock, ttl))
	}
	return out
}

func (m *model) find(id string) *mEntry {
	for _, e := range m.es {
		if e.leased && e.id == id {
			return e
		}
	}
	return nil
}

func (m *model) ack(clock time.Time, ids []string) error {
	m.expire(clock)
	var err error
	for _, id := range ids {
		e := m.find(id)
		if e == nil {
			err = storage.ErrUnknownLease
			continue
		}
		m.es = slices.DeleteFunc(m.es, func(x *mEntry) bool { return x == e })
	}
	return err
}

func (m *model) release(clock, notBefore time.Time, ids []string) error {
	m.expire(clock)
	var err error
	for _, id := range ids {
		e := m.find(id)
		if e == nil {
			err = storage.ErrUnknownLease
			continue
		}
		e.leased, e.id, e.at = false, "", time.Time{}
		if notBefore.After(clock) {
			e.at = notBefore
		}
	}
	return err
}

func (m *model) setReady(ready map[string]time.Time) {
	for h, t := range ready {
		if h != "" && t.After(m.ready[h]) {
			m.ready[h] = t
		}
	}
}

func (m *model) len(clock time.Time) storage.QueueLen {
	m.expire(clock)
	var l storage.QueueLen
	for _, e := range m.es {
		switch {
		case e.leased:
			l.Leased++
		case e.at.After(clock):
			l.Delayed++
		default:
			l.Ready++
		}
	}
	return l
}

// head lists hosts by their best ready entry, each host's ready entries in
// order and then its delayed ones; hosts with only delayed entries last.
func (m *model) head(clock time.Time, n int) []storage.HeadEntry {
	m.expire(clock)
	byEntry := func(a, b *mEntry) int {
		if better(a, b) {
			return -1
		}
		return 1
	}
	ready, delayed := map[string][]*mEntry{}, map[string][]*mEntry{}
	for _, e := range m.es {
		switch {
		case e.leased:
		case e.at.After(clock):
			delayed[e.host] = append(delayed[e.host], e)
		default:
			ready[e.host] = append(ready[e.host], e)
		}
	}
	var withReady, rest []string
	firsts := map[string]*mEntry{}
	for h, es := range ready {
		slices.SortFunc(es, byEntry)
		withReady = append(withReady, h)
		firsts[h] = es[0]
	}
	for h, es := range delayed {
		slices.SortFunc(es, byEntry)
		if firsts[h] == nil {
			rest = append(rest, h)
			firsts[h] = es[0]
		}
	}
	byFirst := func(a, b string) int { return byEntry(firsts[a], firsts[b]) }
	slices.SortFunc(withReady, byFirst)
	slices.SortFunc(rest, byFirst)
	var out []storage.HeadEntry
	for _, h := range append(withReady, rest...) {
		for _, e := range append(ready[h], delayed[h]...) {
			if len(out) < n {
				he := storage.HeadEntry{Host: h, Priority: e.prio, Data: e.data, HostReady: m.ready[h]}
				if e.at.After(clock) {
					he.NotBefore = e.at
				}
				out = append(out, he)
			}
		}
	}
	return out
}
