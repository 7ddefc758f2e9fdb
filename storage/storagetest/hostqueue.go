package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// long is the ttl of leases held while the suite passes LeaseHosts a now
// hours ahead of the clock: the suite does not check which clock a store
// uses for lease deadlines and entries' not-before times, so no lease may
// expire, by either clock, within those hours.
const long = 24 * time.Hour

// RunHostQueue runs the conformance suite for a storage.HostQueue. open must
// return a fresh, empty queue on every call; the suite closes it. A
// HostQueue is a Queue: run RunQueue on the same store as well.
//
// Contract checked: Push is PushHosted with host "" and priority 0, leased
// FIFO; PushHosted pushes all or none, refusing a priority outside the int32
// range with ErrPriorityRange and keeping the int32 extremes exactly;
// LeaseHosts hands out only entries of hosts whose ready time is not after
// now (a future SetHostReady holds a host back, a past one does not, a
// host's ready time outlives its entries, and of two times the later is
// kept) and of hosts holding fewer than perHost leased entries, counting
// leases of any consumer, Lease's included; Ack, Release, ReleaseBatch and
// an expired lease free a slot, Renew does not, a delayed entry holds none;
// a host gives at most perHost minus its leased entries; perHost <= 0 is no
// limit; within a host, priority then push order, a released or expired
// entry keeping its place; across hosts, the highest head priority first,
// then the oldest head; entries with their own not-before are skipped until
// it passes; Entry.Host and Entry.Priority are set by LeaseHosts and Lease,
// and kept through Release; Lease ignores hosts and priorities (push
// order); n <= 0 or ttl <= 0 is ErrInvalidArgument; ErrQueueEmpty when
// nothing can be handed out; Head lists pending entries grouped by host, in
// lease order, with NotBefore and HostReady, and leases nothing; Len counts
// entries of hosts not ready as Ready; concurrent consumers with perHost 1
// never hold two entries of one host and get every entry exactly once, in
// its host's push order; after Close the new methods return ErrClosed.
//
// LeaseHosts' now is used for hosts' ready times only: the suite passes
// times hours ahead of the clock rather than wait, and checks lease expiry
// and entries' not-before with real short waits, calling LeaseHosts with
// time.Now() there.
func RunHostQueue(t *testing.T, open func(t *testing.T) storage.HostQueue) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, q storage.HostQueue)
	}{
		{"PlainPush", hostPlainPush},
		{"PushHostedAllOrNone", hostPushAllOrNone},
		{"PriorityRange", hostPriorityRange},
		{"HostReady", hostReady},
		{"HostReadyLaterKept", hostReadyLaterKept},
		{"HostReadyWithoutEntries", hostReadyWithoutEntries},
		{"ReadyAhead", hostReadyAhead},
		{"PerHost", hostPerHost},
		{"PerHostAnyConsumer", hostPerHostAnyConsumer},
		{"PerHostSlotFreed", hostPerHostSlotFreed},
		{"PerHostExpiredLease", hostPerHostExpiredLease},
		{"PerHostUnlimited", hostPerHostUnlimited},
		{"PriorityWithinHost", hostPriorityWithinHost},
		{"ReleasedKeepsPlace", hostReleasedKeepsPlace},
		{"AcrossHosts", hostAcrossHosts},
		{"NotBeforeSkipped", hostNotBeforeSkipped},
		{"DelayedReturns", hostDelayedReturns},
		{"Fields", hostFields},
		{"PlainLeaseIgnoresHosts", hostPlainLease},
		{"BadArguments", hostBadArguments},
		{"Empty", hostEmpty},
		{"Head", hostHead},
		{"Len", hostLen},
		{"Concurrent", hostConcurrent},
		{"Closed", hostClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := open(t)
			t.Cleanup(func() { closeStore(t, q) })
			tt.run(t, q)
		})
	}
}

// RunHostQueueReopen runs the durability checks of a HostQueue that persists
// entries: open(t, path) opens the store at path, as for RunQueueReopen.
// Checked: after Close and reopen, entries keep their hosts, priorities and
// lease order (an entry leased at Close included, its delivery counted),
// and hosts keep their ready times: a host set ready an hour ahead is not
// leased after reopen until then, so a resumed crawl does not burst it.
func RunHostQueueReopen(t *testing.T, open func(t *testing.T, path string) storage.HostQueue) {
	t.Helper()
	t.Run("HostReopen", func(t *testing.T) {
		ctx := t.Context()
		path := t.TempDir() + "/hostqueue"
		base := time.Now().Truncate(time.Millisecond)
		q := open(t, path)
		hostPush(t, q,
			he("x", 0, "x1"), he("y", 1, "y1"), he("x", 5, "x2"),
			he("z", 9, "z1"), he("y", 1, "y2"), he("", 0, "plain"))
		setReady(t, q, map[string]time.Time{"z": base.Add(time.Hour)})
		held := mustLeaseHosts(t, q, base, 1, 0, long)
		if d := datas(held); !slices.Equal(d, []string{"x2"}) {
			t.Fatalf("LeaseHosts(1) = %q, want [x2] (z is not ready)", d)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close() error = %v, want nil", err)
		}

		q = open(t, path)
		t.Cleanup(func() { closeStore(t, q) })
		wantLen(t, q, storage.QueueLen{Ready: 6})
		head, err := q.Head(ctx, 10)
		if err != nil {
			t.Fatalf("Head(10) after reopen error = %v, want nil", err)
		}
		if d := headDatas(head); !slices.Equal(d, []string{"z1", "x2", "x1", "y1", "y2", "plain"}) {
			t.Errorf("Head(10) after reopen = %q, want [z1 x2 x1 y1 y2 plain]", d)
		}
		for _, h := range head {
			if h.Host == "z" && !sameMilli(h.HostReady, base.Add(time.Hour)) {
				t.Errorf("Head() after reopen: z's HostReady = %v, want %v", h.HostReady, base.Add(time.Hour))
			}
		}
		now := time.Now()
		got := mustLeaseHosts(t, q, now, 10, 0, long)
		wantHostOrder(t, "LeaseHosts after reopen", got, map[string][]string{
			"x": {"x2", "x1"}, "y": {"y1", "y2"}, "": {"plain"},
		})
		for _, e := range got {
			want := map[string]int{"x1": 0, "x2": 5, "y1": 1, "y2": 1, "plain": 0}[string(e.Data)]
			if e.Priority != want {
				t.Errorf("entry %q Priority after reopen = %d, want %d", e.Data, e.Priority, want)
			}
			wantDeliveries := 1
			if string(e.Data) == "x2" {
				wantDeliveries = 2
			}
			if e.Deliveries != wantDeliveries {
				t.Errorf("entry %q Deliveries after reopen = %d, want %d", e.Data, e.Deliveries, wantDeliveries)
			}
		}
		wantNoHostLease(t, q, now.Add(30*time.Minute), 10, 0, "z is ready in an hour, kept across reopen")
		got = mustLeaseHosts(t, q, base.Add(time.Hour), 10, 0, long)
		if len(got) != 1 || string(got[0].Data) != "z1" || got[0].Host != "z" || got[0].Priority != 9 {
			t.Fatalf("LeaseHosts at z's ready time = %+v, want z1 of host z, priority 9", got)
		}
	})
}

// hostPlainPush: Push is host "" priority 0, FIFO through LeaseHosts, and
// host "" (entries whose host the store was not told) has no per-host
// limit and no ready time.
func hostPlainPush(t *testing.T, q storage.HostQueue) {
	now := time.Now()
	mustPush(t, q, "a", "b")
	hostPush(t, q, he("", 0, "c"))
	mustPush(t, q, "d")
	var got []string
	for range 4 {
		e := mustLeaseHosts(t, q, now, 1, 0, long)[0]
		if e.Host != "" || e.Priority != 0 {
			t.Errorf("LeaseHosts() of pushed %q: Host, Priority = %q, %d; want \"\", 0", e.Data, e.Host, e.Priority)
		}
		got = append(got, string(e.Data))
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("LeaseHosts(1) x4 = %q, want %q", got, want)
	}
	mustPush(t, q, "e", "f")
	if err := q.SetHostReady(t.Context(), map[string]time.Time{"": now.Add(time.Hour)}); err != nil {
		t.Fatalf("SetHostReady(\"\": +1h) error = %v, want nil", err)
	}
	// Host "" holds 4 leases and was given a ready time: neither a limit
	// of 1 per host nor the ready time holds it back.
	if got := datas(mustLeaseHosts(t, q, now, 10, 1, long)); !slices.Equal(got, []string{"e", "f"}) {
		t.Errorf("LeaseHosts(10, perHost 1) of host \"\" with 4 leased = %q, want [e f]", got)
	}
}

func hostPushAllOrNone(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	for _, p := range outOfRange() {
		err := q.PushHosted(ctx, he("a.example", 0, "a"), he("b.example", p, "b"))
		if !errors.Is(err, storage.ErrPriorityRange) {
			t.Errorf("PushHosted(priority %d) error = %v, want %v", p, err, storage.ErrPriorityRange)
		}
	}
	wantLen(t, q, storage.QueueLen{})
	if err := q.PushHosted(ctx); err != nil {
		t.Errorf("PushHosted() with no entries error = %v, want nil", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := q.PushHosted(cancelled, he("a.example", 0, "a")); !errors.Is(err, context.Canceled) {
		t.Errorf("PushHosted(cancelled ctx) error = %v, want %v", err, context.Canceled)
	}
	wantLen(t, q, storage.QueueLen{})
}

func outOfRange() []int {
	if strconv.IntSize < 64 {
		return nil
	}
	top, bottom := math.MaxInt32, math.MinInt32
	return []int{top + 1, bottom - 1, math.MaxInt, math.MinInt}
}

// hostPriorityRange: the int32 extremes are kept exactly and ordered.
func hostPriorityRange(t *testing.T, q storage.HostQueue) {
	hostPush(t, q, he("h", math.MinInt32, "min"), he("h", 0, "zero"), he("h", math.MaxInt32, "max"))
	got := mustLeaseHosts(t, q, time.Now(), 3, 0, long)
	if d := datas(got); !slices.Equal(d, []string{"max", "zero", "min"}) {
		t.Fatalf("LeaseHosts(3) = %q, want [max zero min]", d)
	}
	for i, want := range []int{math.MaxInt32, 0, math.MinInt32} {
		if got[i].Priority != want {
			t.Errorf("entry %q Priority = %d, want %d", got[i].Data, got[i].Priority, want)
		}
	}
}

// hostReady: a future ready time holds a host back until now reaches it
// (to the millisecond), a past one does not.
func hostReady(t *testing.T, q storage.HostQueue) {
	base := time.Now().Truncate(time.Millisecond)
	hostPush(t, q, he("slow", 0, "s1"), he("fast", 0, "f1"), he("past", 0, "p1"))
	setReady(t, q, map[string]time.Time{"slow": base.Add(time.Hour), "past": base.Add(-time.Hour)})
	got := mustLeaseHosts(t, q, base, 10, 0, long)
	if d := datas(got); !sameSet(d, []string{"f1", "p1"}) {
		t.Fatalf("LeaseHosts(now) = %q, want f1 and p1 (slow is ready in an hour)", d)
	}
	wantNoHostLease(t, q, base.Add(time.Hour-time.Millisecond), 10, 0, "a millisecond before slow's ready time")
	got = mustLeaseHosts(t, q, base.Add(time.Hour), 10, 0, long)
	if d := datas(got); !slices.Equal(d, []string{"s1"}) {
		t.Fatalf("LeaseHosts(slow's ready time) = %q, want [s1]", d)
	}
}

// hostReadyLaterKept: of two ready times given for a host, in one call or
// two, the later holds.
func hostReadyLaterKept(t *testing.T, q storage.HostQueue) {
	base := time.Now()
	hostPush(t, q, he("x", 0, "x1"), he("y", 0, "y1"))
	setReady(t, q, map[string]time.Time{"x": base.Add(2 * time.Hour), "y": base.Add(time.Hour)})
	setReady(t, q, map[string]time.Time{"x": base.Add(time.Hour), "y": base.Add(2 * time.Hour)})
	wantNoHostLease(t, q, base.Add(90*time.Minute), 10, 0, "x and y are both ready in two hours")
	got := mustLeaseHosts(t, q, base.Add(3*time.Hour), 10, 0, long)
	if d := datas(got); !sameSet(d, []string{"x1", "y1"}) {
		t.Fatalf("LeaseHosts(+3h) = %q, want x1 and y1", d)
	}
	if err := q.SetHostReady(t.Context(), nil); err != nil {
		t.Errorf("SetHostReady(nil) error = %v, want nil", err)
	}
}

// hostReadyAhead: a run leases with a now ahead of the clock and holds
// each entry until its Entry.HostReady, so LeaseHosts hands out the entries
// of the hosts ready by that now, each with its host's stored ready time
// (at the millisecond), zero for a host with none and for host "".
func hostReadyAhead(t *testing.T, q storage.HostQueue) {
	base := time.Now().Truncate(time.Millisecond)
	ahead := base.Add(time.Hour)
	hostPush(t, q, he("a", 0, "a1"), he("none", 0, "n1"), he("later", 0, "l1"), he("", 3, "plain"))
	setReady(t, q, map[string]time.Time{"a": ahead, "later": ahead.Add(time.Millisecond)})
	got := mustLeaseHosts(t, q, ahead, 10, 0, long)
	if d := datas(got); !sameSet(d, []string{"a1", "n1", "plain"}) {
		t.Fatalf("LeaseHosts(now = a's ready time) = %q, want a1, n1 and plain (later is ready a millisecond after)", d)
	}
	for _, e := range got {
		want := time.Time{}
		if e.Host == "a" {
			want = ahead
		}
		if !sameMilli(e.HostReady, want) {
			t.Errorf("LeaseHosts(): %q of host %q HostReady = %v, want %v", e.Data, e.Host, e.HostReady, want)
		}
	}
}

// hostReadyWithoutEntries: a ready time set for a host with no entries (the
// run sets it after fetching a host's last page) applies to entries pushed
// later.
func hostReadyWithoutEntries(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	base := time.Now()
	setReady(t, q, map[string]time.Time{"z": base.Add(time.Hour)})
	hostPush(t, q, he("z", 0, "z1"))
	wantNoHostLease(t, q, base, 10, 0, "z is ready in an hour, set before it had entries")
	got := mustLeaseHosts(t, q, base.Add(2*time.Hour), 10, 0, long)
	if err := q.Ack(ctx, got[0].ID); err != nil {
		t.Fatalf("Ack(z1) error = %v, want nil", err)
	}
	setReady(t, q, map[string]time.Time{"z": base.Add(3 * time.Hour)})
	hostPush(t, q, he("z", 0, "z2"))
	wantNoHostLease(t, q, base.Add(2*time.Hour), 10, 0, "z is ready in three hours, set with no entry pending")
	if d := datas(mustLeaseHosts(t, q, base.Add(4*time.Hour), 10, 0, long)); !slices.Equal(d, []string{"z2"}) {
		t.Errorf("LeaseHosts(+4h) = %q, want [z2]", d)
	}
}

func hostPerHost(t *testing.T, q storage.HostQueue) {
	now := time.Now()
	hostPush(t, q, he("a", 0, "a1"), he("b", 0, "b1"), he("a", 0, "a2"), he("b", 0, "b2"), he("a", 0, "a3"), he("b", 0, "b3"))
	got := mustLeaseHosts(t, q, now, 10, 2, long)
	wantHostOrder(t, "LeaseHosts(10, perHost 2)", got, map[string][]string{"a": {"a1", "a2"}, "b": {"b1", "b2"}})
	wantNoHostLease(t, q, now, 10, 2, "every host holds 2 leases")
	// A larger limit lets each host give the difference.
	got = mustLeaseHosts(t, q, now, 10, 3, long)
	wantHostOrder(t, "LeaseHosts(10, perHost 3) with 2 leased per host", got, map[string][]string{"a": {"a3"}, "b": {"b3"}})
}

// hostPerHostAnyConsumer: a lease taken with Lease counts against its host.
func hostPerHostAnyConsumer(t *testing.T, q storage.HostQueue) {
	now := time.Now()
	hostPush(t, q, he("c", 0, "c1"), he("c", 0, "c2"), he("d", 0, "d1"))
	if d := datas(mustLease(t, q, 1, long)); !slices.Equal(d, []string{"c1"}) {
		t.Fatalf("Lease(1) = %q, want [c1]", d)
	}
	if d := datas(mustLeaseHosts(t, q, now, 10, 1, long)); !slices.Equal(d, []string{"d1"}) {
		t.Fatalf("LeaseHosts(10, perHost 1) with c1 leased by Lease = %q, want [d1]", d)
	}
}

// hostPerHostSlotFreed: Ack, Release, ReleaseBatch and a delayed Release
// free a host's slot; Renew and an Ack of unknown IDs beside known ones do
// not hold one.
func hostPerHostSlotFreed(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	now := time.Now()
	hostPush(t, q, he("a", 0, "a1"), he("a", 0, "a2"), he("a", 0, "a3"))
	one := func(want string, deliveries int, after string) storage.Entry {
		t.Helper()
		got := mustLeaseHosts(t, q, time.Now(), 10, 1, long)
		if len(got) != 1 || string(got[0].Data) != want || got[0].Deliveries != deliveries {
			t.Fatalf("LeaseHosts(10, perHost 1) after %s = %q (Deliveries %d), want [%s] (Deliveries %d)",
				after, datas(got), got[0].Deliveries, want, deliveries)
		}
		wantNoHostLease(t, q, time.Now(), 10, 1, "a holds its one lease after "+after)
		return got[0]
	}
	e := one("a1", 1, "Push")
	if err := q.Ack(ctx, e.ID); err != nil {
		t.Fatalf("Ack(a1) error = %v, want nil", err)
	}
	e = one("a2", 1, "Ack")
	if err := q.Release(ctx, e.ID, time.Time{}); err != nil {
		t.Fatalf("Release(a2) error = %v, want nil", err)
	}
	e = one("a2", 2, "Release")
	if err := storage.ReleaseBatch(ctx, q, time.Time{}, e.ID); err != nil {
		t.Fatalf("ReleaseBatch(a2) error = %v, want nil", err)
	}
	e = one("a2", 3, "ReleaseBatch")
	if err := storage.RenewLeases(ctx, q, long, e.ID); err != nil && !errors.Is(err, storage.ErrUnsupported) {
		t.Fatalf("Renew(a2) error = %v, want nil", err)
	}
	wantNoHostLease(t, q, now, 10, 1, "a2's lease was renewed")
	if err := q.Ack(ctx, "no-such-lease", e.ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Ack(unknown, a2) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	e = one("a3", 1, "Ack of an unknown and a held lease")
	hostPush(t, q, he("a", 0, "a4"))
	if err := q.Release(ctx, e.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Release(a3, +1h) error = %v, want nil", err)
	}
	one("a4", 1, "a delayed Release")
}

// hostPerHostExpiredLease: an expired lease frees its host's slot and its
// entry comes back first, in its place.
func hostPerHostExpiredLease(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	hostPush(t, q, he("e", 0, "e1"), he("e", 0, "e2"))
	first := mustLeaseHosts(t, q, time.Now(), 1, 1, short)
	if string(first[0].Data) != "e1" {
		t.Fatalf("LeaseHosts(1) = %q, want e1", first[0].Data)
	}
	wantNoHostLease(t, q, time.Now(), 10, 1, "e1 is leased")
	var second []storage.Entry
	eventually(t, "expired lease frees its host", func() bool {
		var err error
		second, err = q.LeaseHosts(ctx, time.Now(), 10, 1, time.Hour)
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("LeaseHosts() error = %v, want nil or %v", err, storage.ErrQueueEmpty)
		}
		return err == nil
	})
	if len(second) != 1 || string(second[0].Data) != "e1" || second[0].Deliveries != 2 {
		t.Fatalf("LeaseHosts(10, perHost 1) after e1's lease expired = %q, want [e1] with Deliveries 2", datas(second))
	}
	if err := q.Ack(ctx, first[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Ack(expired lease) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	wantNoHostLease(t, q, time.Now(), 10, 1, "e1 is leased again")
}

func hostPerHostUnlimited(t *testing.T, q storage.HostQueue) {
	now := time.Now()
	for _, perHost := range []int{0, -1} {
		want := make([]string, 5)
		for i := range want {
			want[i] = fmt.Sprintf("f%d/%d", perHost, i)
			hostPush(t, q, he("f", 0, want[i]))
		}
		if got := datas(mustLeaseHosts(t, q, now, 10, perHost, long)); !slices.Equal(got, want) {
			t.Errorf("LeaseHosts(10, perHost %d) = %q, want %q", perHost, got, want)
		}
	}
}

func hostPriorityWithinHost(t *testing.T, q storage.HostQueue) {
	want := []string{"b", "d", "f", "a", "c", "e"}
	for _, host := range []string{"h", "i"} {
		hostPush(t, q, he(host, 0, "a"), he(host, 5, "b"), he(host, 0, "c"))
		hostPush(t, q, he(host, 5, "d"), he(host, -3, "e"), he(host, 5, "f"))
	}
	setReady(t, q, map[string]time.Time{"i": time.Now().Add(time.Hour)})
	// One call: the entries come in lease order.
	if got := datas(mustLeaseHosts(t, q, time.Now(), 10, 0, long)); !slices.Equal(got, want) {
		t.Errorf("LeaseHosts(10) of host h = %q, want %q", got, want)
	}
	// One at a time: the store, not the batch, keeps the order.
	var got []string
	for range want {
		got = append(got, datas(mustLeaseHosts(t, q, time.Now().Add(2*time.Hour), 1, 0, long))...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("LeaseHosts(1) x%d of host i = %q, want %q", len(want), got, want)
	}
}

func hostReleasedKeepsPlace(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	now := time.Now()
	hostPush(t, q, he("h", 0, "a"), he("h", 0, "b"), he("h", 0, "c"), he("h", 1, "d"))
	got := mustLeaseHosts(t, q, now, 3, 0, long)
	if d := datas(got); !slices.Equal(d, []string{"d", "a", "b"}) {
		t.Fatalf("LeaseHosts(3) = %q, want [d a b]", d)
	}
	for _, i := range []int{2, 0, 1} {
		if err := q.Release(ctx, got[i].ID, time.Time{}); err != nil {
			t.Fatalf("Release(%q) error = %v, want nil", got[i].Data, err)
		}
	}
	again := mustLeaseHosts(t, q, now, 10, 0, long)
	if d := datas(again); !slices.Equal(d, []string{"d", "a", "b", "c"}) {
		t.Errorf("LeaseHosts(10) after releasing b, d, a = %q, want [d a b c]", d)
	}
}

func hostAcrossHosts(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	now := time.Now()
	hostPush(t, q, he("low", 0, "l1"), he("mid1", 3, "m1"))
	hostPush(t, q, he("top", 5, "t1"), he("top", 0, "t2"), he("mid2", 3, "n1"), he("low2", 0, "k1"))
	var got []string
	var ids []string
	for range 6 {
		e := mustLeaseHosts(t, q, now, 1, 0, long)[0]
		got, ids = append(got, string(e.Data)), append(ids, e.ID)
	}
	if want := []string{"t1", "m1", "n1", "l1", "t2", "k1"}; !slices.Equal(got, want) {
		t.Errorf("LeaseHosts(1) x6 = %q, want %q (highest head first, then the oldest head)", got, want)
	}
	if err := q.Ack(ctx, ids...); err != nil {
		t.Fatalf("Ack() error = %v, want nil", err)
	}
	// One entry per host: the n hosts with the best heads give one each.
	hostPush(t, q, he("B", 2, "b1"), he("A", 2, "a1"), he("C", 1, "c1"), he("D", 9, "d1"), he("E", 2, "e1"), he("B", 2, "b2"))
	setReady(t, q, map[string]time.Time{"D": now.Add(time.Hour)})
	if d := datas(mustLeaseHosts(t, q, now, 2, 1, long)); !sameSet(d, []string{"b1", "a1"}) {
		t.Errorf("LeaseHosts(2, perHost 1) = %q, want b1 and a1 (D is not ready, E's head is younger)", d)
	}
	if d := datas(mustLeaseHosts(t, q, now, 1, 1, long)); !slices.Equal(d, []string{"e1"}) {
		t.Errorf("LeaseHosts(1, perHost 1) = %q, want [e1] (A and B are at their limit)", d)
	}
	if d := datas(mustLeaseHosts(t, q, now, 10, 1, long)); !slices.Equal(d, []string{"c1"}) {
		t.Errorf("LeaseHosts(10, perHost 1) = %q, want [c1]", d)
	}
}

// hostNotBeforeSkipped: an entry waiting for its own not-before is not
// handed out and holds no slot of its host.
func hostNotBeforeSkipped(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	hostPush(t, q, he("h", 0, "a"), he("h", 0, "b"), he("i", 0, "c"))
	a := mustLeaseHosts(t, q, time.Now(), 1, 0, long)
	if string(a[0].Data) != "a" {
		t.Fatalf("LeaseHosts(1) = %q, want a", a[0].Data)
	}
	if err := q.Release(ctx, a[0].ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Release(a, +1h) error = %v, want nil", err)
	}
	got := mustLeaseHosts(t, q, time.Now(), 10, 1, long)
	if d := datas(got); !sameSet(d, []string{"b", "c"}) {
		t.Fatalf("LeaseHosts(10, perHost 1) with a delayed = %q, want b and c", d)
	}
	wantLen(t, q, storage.QueueLen{Delayed: 1, Leased: 2})
	wantNoHostLease(t, q, time.Now(), 10, 0, "only a, delayed an hour, is pending")
}

func hostDelayedReturns(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	hostPush(t, q, he("h", 7, "a"))
	es := mustLeaseHosts(t, q, time.Now(), 1, 1, time.Minute)
	notBefore := time.Now().Add(2 * short)
	if err := q.Release(ctx, es[0].ID, notBefore); err != nil {
		t.Fatalf("Release(a, +%v) error = %v, want nil", 2*short, err)
	}
	wantNoHostLease(t, q, time.Now(), 1, 1, "a waits for its not-before")
	var got []storage.Entry
	eventually(t, "delayed entry becomes leasable", func() bool {
		var err error
		got, err = q.LeaseHosts(ctx, time.Now(), 1, 1, time.Minute)
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("LeaseHosts() error = %v, want nil or %v", err, storage.ErrQueueEmpty)
		}
		return err == nil
	})
	// 10 ms of slack for stores that keep times in milliseconds.
	if now := time.Now(); now.Before(notBefore.Add(-10 * time.Millisecond)) {
		t.Errorf("delayed entry leased %v before its not-before time", notBefore.Sub(now))
	}
	if e := got[0]; string(e.Data) != "a" || e.Host != "h" || e.Priority != 7 || e.Deliveries != 2 {
		t.Errorf("LeaseHosts() = %q of host %q, priority %d, Deliveries %d; want a of h, 7, 2", e.Data, e.Host, e.Priority, e.Deliveries)
	}
}

// hostFields: Data, Host and Priority come back exactly, from LeaseHosts and
// from Lease, and survive a Release.
func hostFields(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	pushed := []storage.HostEntry{
		{Host: "example.com:443", Priority: 7, Data: []byte{0, 1, 2, 0xff, '\n', 0}},
		{Host: "[::1]:8080", Priority: -2, Data: []byte(`{"URL":"http://[::1]:8080/ü?q=1&r=2"}`)},
		{Host: "xn--mnchen-3ya.example", Priority: 1, Data: bytes.Repeat([]byte("x"), 64<<10)},
		{Host: "", Priority: 0, Data: []byte("plain")},
	}
	hostPush(t, q, pushed...)
	check := func(what string, es []storage.Entry, deliveries int) {
		t.Helper()
		if len(es) != len(pushed) {
			t.Fatalf("%s returned %d entries, want %d", what, len(es), len(pushed))
		}
		for _, e := range es {
			i := slices.IndexFunc(pushed, func(p storage.HostEntry) bool { return bytes.Equal(p.Data, e.Data) })
			if i < 0 {
				t.Errorf("%s returned unknown data %q", what, trunc(e.Data))
				continue
			}
			if e.Host != pushed[i].Host || e.Priority != pushed[i].Priority || e.Deliveries != deliveries {
				t.Errorf("%s: entry %q Host, Priority, Deliveries = %q, %d, %d; want %q, %d, %d",
					what, trunc(e.Data), e.Host, e.Priority, e.Deliveries, pushed[i].Host, pushed[i].Priority, deliveries)
			}
		}
	}
	es := mustLeaseHosts(t, q, time.Now(), 10, 0, long)
	check("LeaseHosts(10)", es, 1)
	for _, e := range es {
		if err := q.Release(ctx, e.ID, time.Time{}); err != nil {
			t.Fatalf("Release(%q) error = %v, want nil", e.ID, err)
		}
	}
	es = mustLease(t, q, 10, long)
	check("Lease(10) after Release", es, 2)
}

// hostPlainLease: Lease hands out in push order, ignoring priorities, hosts'
// ready times and per-host limits.
func hostPlainLease(t *testing.T, q storage.HostQueue) {
	hostPush(t, q, he("x", 0, "a"), he("y", 9, "b"), he("x", 5, "c"))
	setReady(t, q, map[string]time.Time{"x": time.Now().Add(time.Hour)})
	es := mustLease(t, q, 3, long)
	if d := datas(es); !slices.Equal(d, []string{"a", "b", "c"}) {
		t.Fatalf("Lease(3) = %q, want [a b c] (push order)", d)
	}
	for i, want := range []struct {
		host string
		prio int
	}{{"x", 0}, {"y", 9}, {"x", 5}} {
		if es[i].Host != want.host || es[i].Priority != want.prio {
			t.Errorf("Lease(): entry %q Host, Priority = %q, %d; want %q, %d", es[i].Data, es[i].Host, es[i].Priority, want.host, want.prio)
		}
	}
}

func hostBadArguments(t *testing.T, q storage.HostQueue) {
	hostPush(t, q, he("h", 0, "a"))
	for _, tc := range []struct {
		n   int
		ttl time.Duration
	}{{0, time.Minute}, {-1, time.Minute}, {1, 0}, {1, -time.Second}} {
		if es, err := q.LeaseHosts(t.Context(), time.Now(), tc.n, 1, tc.ttl); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("LeaseHosts(n %d, ttl %v) = %v, %v; want %v", tc.n, tc.ttl, es, err, storage.ErrInvalidArgument)
		}
	}
	wantLen(t, q, storage.QueueLen{Ready: 1})
}

func hostEmpty(t *testing.T, q storage.HostQueue) {
	now := time.Now()
	wantNoHostLease(t, q, now, 1, 0, "the queue is empty")
	hostPush(t, q, he("h", 0, "a"))
	setReady(t, q, map[string]time.Time{"h": now.Add(time.Hour)})
	wantNoHostLease(t, q, now, 1, 0, "h is not ready")
	mustLeaseHosts(t, q, now.Add(2*time.Hour), 1, 0, long)
	wantNoHostLease(t, q, now.Add(2*time.Hour), 1, 0, "every entry is leased")
}

// hostHead: Head lists pending entries grouped by host, hosts by their next
// pending entry, each host's in lease order; it leases nothing.
func hostHead(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	base := time.Now().Truncate(time.Millisecond)
	hostPush(t, q, he("d", 0, "d1"), he("w", 0, "w1"), he("w", 0, "w2"))
	hostPush(t, q, he("x", 0, "x1"), he("y", 2, "y1"), he("y", 0, "y2"), he("x", 5, "x2"), he("z", 2, "z1"))
	setReady(t, q, map[string]time.Time{"y": base.Add(time.Hour)})
	es := mustLease(t, q, 2, long) // d1 and w1
	if err := q.Release(ctx, es[0].ID, base.Add(time.Hour)); err != nil {
		t.Fatalf("Release(d1, +1h) error = %v, want nil", err)
	}
	before := mustLen(t, q)
	head, err := q.Head(ctx, 100)
	if err != nil {
		t.Fatalf("Head(100) error = %v, want nil", err)
	}
	// d1's place is not part of the contract: it waits for its not-before.
	var order []string
	for _, h := range head {
		if string(h.Data) != "d1" {
			order = append(order, string(h.Data))
		}
	}
	if want := []string{"x2", "x1", "y1", "y2", "z1", "w2"}; len(head) != 7 || !slices.Equal(order, want) {
		t.Errorf("Head(100) = %q, want %q and d1 (w1 is leased)", headDatas(head), want)
	}
	prio := map[string]int{"x1": 0, "x2": 5, "y1": 2, "y2": 0, "z1": 2, "w2": 0, "d1": 0}
	for _, h := range head {
		d := string(h.Data)
		if h.Host != d[:1] || h.Priority != prio[d] {
			t.Errorf("Head(): %q Host, Priority = %q, %d; want %q, %d", d, h.Host, h.Priority, d[:1], prio[d])
		}
		wantReady, wantNotBefore := time.Time{}, time.Time{}
		if h.Host == "y" {
			wantReady = base.Add(time.Hour)
		}
		if d == "d1" {
			wantNotBefore = base.Add(time.Hour)
		}
		if !sameMilli(h.HostReady, wantReady) || !sameMilli(h.NotBefore, wantNotBefore) {
			t.Errorf("Head(): %q HostReady, NotBefore = %v, %v; want %v, %v", d, h.HostReady, h.NotBefore, wantReady, wantNotBefore)
		}
	}
	first3, err := q.Head(ctx, 3)
	if err != nil {
		t.Fatalf("Head(3) error = %v, want nil", err)
	}
	if got, want := headDatas(first3), headDatas(head)[:3]; !slices.Equal(got, want) {
		t.Errorf("Head(3) = %q, want %q (the first 3 of Head(100))", got, want)
	}
	if after := mustLen(t, q); after != before {
		t.Errorf("Len() after Head = %+v, want %+v (Head leases nothing)", after, before)
	}
	got := mustLeaseHosts(t, q, base, 1, 0, long)
	if string(got[0].Data) != "x2" || got[0].Deliveries != 1 {
		t.Errorf("LeaseHosts(1) after Head = %q with Deliveries %d, want x2 with 1", got[0].Data, got[0].Deliveries)
	}
}

// hostLen: a host's ready time does not change how its entries count.
func hostLen(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	now := time.Now()
	hostPush(t, q, he("a", 0, "a1"), he("a", 0, "a2"), he("a", 0, "a3"), he("b", 0, "b1"))
	setReady(t, q, map[string]time.Time{"a": now.Add(time.Hour)})
	wantLen(t, q, storage.QueueLen{Ready: 4})
	got := mustLeaseHosts(t, q, now.Add(2*time.Hour), 1, 0, long)
	if string(got[0].Data) != "a1" {
		t.Fatalf("LeaseHosts(+2h, 1) = %q, want a1", got[0].Data)
	}
	wantLen(t, q, storage.QueueLen{Ready: 3, Leased: 1})
	b := mustLeaseHosts(t, q, now, 10, 0, long)
	if d := datas(b); !slices.Equal(d, []string{"b1"}) {
		t.Fatalf("LeaseHosts(now, 10) = %q, want [b1]", d)
	}
	wantLen(t, q, storage.QueueLen{Ready: 2, Leased: 2})
	if err := q.Release(ctx, b[0].ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Release(b1, +1h) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{Ready: 2, Delayed: 1, Leased: 1})
}

// hostConcurrent pushes the entries of several hosts from several
// goroutines (each host from one) while others lease with perHost 1 and
// ack: no two entries of a host are ever held at once, every entry is seen
// exactly once, and each host's entries come in its push order.
func hostConcurrent(t *testing.T, q storage.HostQueue) {
	const (
		hosts    = 16
		perHost  = 30
		pushers  = 4
		leasers  = 4
		total    = hosts * perHost
		maxBatch = 5
	)
	ctx := t.Context()
	var notify <-chan struct{}
	if n, ok := q.(storage.QueueNotifier); ok {
		notify = n.Notify()
	}
	var (
		mu    sync.Mutex // guards held, seen, order and errs
		held  = make(map[string]int)
		seen  = make(map[string]int)
		order = make(map[string][]int)
		errs  []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	done := make(chan struct{})
	var closeDone sync.Once
	stop := func() { closeDone.Do(func() { close(done) }) }
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := 0; i < perHost; {
				var batch []storage.HostEntry
				for n := 1 + (i+p)%maxBatch; n > 0 && i < perHost; n-- {
					for h := p; h < hosts; h += pushers {
						batch = append(batch, he(fmt.Sprintf("h%d", h), 0, fmt.Sprintf("h%d/%d", h, i)))
					}
					i++
				}
				if err := q.PushHosted(ctx, batch...); err != nil {
					fail(fmt.Errorf("PushHosted() error = %w", err))
					stop()
					return
				}
			}
		})
	}
	for l := range leasers {
		wg.Go(func() {
			tk := time.NewTicker(tick)
			defer tk.Stop()
			for n := 1; ; n = n%8 + 1 + l%2 {
				select {
				case <-done:
					return
				default:
				}
				es, err := q.LeaseHosts(ctx, time.Now(), n, 1, time.Minute)
				if errors.Is(err, storage.ErrQueueEmpty) {
					select {
					case <-done:
						return
					case <-notify:
					case <-tk.C:
					}
					continue
				}
				if err != nil {
					fail(fmt.Errorf("LeaseHosts(%d) error = %w", n, err))
					stop()
					return
				}
				ids := make([]string, len(es))
				mu.Lock()
				for i, e := range es {
					ids[i] = e.ID
					seen[string(e.Data)]++
					if held[e.Host]++; held[e.Host] > 1 {
						errs = append(errs, fmt.Errorf("host %q: %d entries held at once with perHost 1", e.Host, held[e.Host]))
					}
					var h, k int
					if _, err := fmt.Sscanf(string(e.Data), "h%d/%d", &h, &k); err != nil || e.Host != fmt.Sprintf("h%d", h) {
						errs = append(errs, fmt.Errorf("entry %q has Host %q", e.Data, e.Host))
					}
					order[e.Host] = append(order[e.Host], k)
				}
				finished := len(seen) == total
				mu.Unlock()
				// held stays raised from the lease to just before the Ack:
				// an entry of the same host handed to another consumer in
				// between is caught, and held never overcounts the store.
				mu.Lock()
				for _, e := range es {
					held[e.Host]--
				}
				mu.Unlock()
				if err := q.Ack(ctx, ids...); err != nil {
					fail(fmt.Errorf("Ack() error = %w", err))
				}
				if finished {
					stop()
				}
			}
		})
	}
	select {
	case <-done:
	case <-time.After(2 * waitFor):
		stop()
		wg.Wait()
		t.Fatalf("after %v only %d of %d entries were leased", 2*waitFor, len(seen), total)
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(seen) != total {
		t.Errorf("leased %d distinct entries, want %d", len(seen), total)
	}
	for d, n := range seen {
		if n != 1 {
			t.Errorf("entry %q leased %d times, want 1", d, n)
		}
	}
	for h, ks := range order {
		if !slices.IsSorted(ks) {
			t.Errorf("host %q leased in order %v, want its push order", h, ks)
		}
	}
	wantLen(t, q, storage.QueueLen{})
}

func hostClosed(t *testing.T, q storage.HostQueue) {
	ctx := t.Context()
	hostPush(t, q, he("h", 0, "a"))
	if err := q.Close(); err != nil {
		t.Fatalf("Close() error = %v, want nil", err)
	}
	checks := []struct {
		name string
		err  error
	}{
		{"PushHosted", q.PushHosted(ctx, he("h", 0, "b"))},
		{"LeaseHosts", func() error { _, err := q.LeaseHosts(ctx, time.Now(), 1, 1, time.Minute); return err }()},
		{"SetHostReady", q.SetHostReady(ctx, map[string]time.Time{"h": time.Now()})},
		{"Head", func() error { _, err := q.Head(ctx, 1); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, storage.ErrClosed) {
			t.Errorf("%s() after Close error = %v, want %v", c.name, c.err, storage.ErrClosed)
		}
	}
}

func he(host string, priority int, data string) storage.HostEntry {
	return storage.HostEntry{Host: host, Priority: priority, Data: []byte(data)}
}

func hostPush(t *testing.T, q storage.HostQueue, entries ...storage.HostEntry) {
	t.Helper()
	if err := q.PushHosted(t.Context(), entries...); err != nil {
		t.Fatalf("PushHosted(%d entries) error = %v, want nil", len(entries), err)
	}
}

func setReady(t *testing.T, q storage.HostQueue, ready map[string]time.Time) {
	t.Helper()
	if err := q.SetHostReady(t.Context(), ready); err != nil {
		t.Fatalf("SetHostReady(%v) error = %v, want nil", ready, err)
	}
}

// mustLeaseHosts calls LeaseHosts, failing on an error, no entries, more than
// n, or empty or duplicate IDs.
func mustLeaseHosts(t *testing.T, q storage.HostQueue, now time.Time, n, perHost int, ttl time.Duration) []storage.Entry {
	t.Helper()
	es, err := q.LeaseHosts(t.Context(), now, n, perHost, ttl)
	if err != nil {
		t.Fatalf("LeaseHosts(%d, perHost %d, %v) error = %v, want nil", n, perHost, ttl, err)
	}
	if len(es) == 0 || len(es) > n {
		t.Fatalf("LeaseHosts(%d, perHost %d, %v) returned %d entries, want 1..%d", n, perHost, ttl, len(es), n)
	}
	ids := make(map[string]bool, len(es))
	for _, e := range es {
		if e.ID == "" || ids[e.ID] {
			t.Fatalf("LeaseHosts(%d, perHost %d, %v) returned empty or duplicate ID %q", n, perHost, ttl, e.ID)
		}
		ids[e.ID] = true
	}
	return es
}

func wantNoHostLease(t *testing.T, q storage.HostQueue, now time.Time, n, perHost int, why string) {
	t.Helper()
	es, err := q.LeaseHosts(t.Context(), now, n, perHost, long)
	if !errors.Is(err, storage.ErrQueueEmpty) || len(es) != 0 {
		t.Fatalf("LeaseHosts(%d, perHost %d) = %q, %v; want %v (%s)", n, perHost, datas(es), err, storage.ErrQueueEmpty, why)
	}
}

// wantHostOrder checks that es holds exactly the entries of want, each
// host's in the order given; the order across hosts is not checked.
func wantHostOrder(t *testing.T, what string, es []storage.Entry, want map[string][]string) {
	t.Helper()
	got := make(map[string][]string)
	for _, e := range es {
		got[e.Host] = append(got[e.Host], string(e.Data))
	}
	if len(got) != len(want) {
		t.Errorf("%s = %q, want per host %q", what, datas(es), want)
		return
	}
	for h, w := range want {
		if !slices.Equal(got[h], w) {
			t.Errorf("%s = %q, want per host %q", what, datas(es), want)
			return
		}
	}
}

func headDatas(hs []storage.HeadEntry) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h.Data)
	}
	return out
}

// sameMilli reports whether a and b are both zero, or equal to the
// millisecond, the precision every store keeps.
func sameMilli(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return d > -time.Millisecond && d < time.Millisecond
}
