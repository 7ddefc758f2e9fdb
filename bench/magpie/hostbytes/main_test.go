package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// fakeHostQueue is a storage.HostQueue good enough for fill: the memory
// queue for the entries, and a map of hosts with their ready times, which
// costs bytes per host as a real store's host table does.
type fakeHostQueue struct {
	*storage.MemoryQueue
	mu    sync.Mutex
	hosts map[string]time.Time
}

func newFake() *fakeHostQueue {
	return &fakeHostQueue{MemoryQueue: storage.NewMemoryQueue(0), hosts: map[string]time.Time{}}
}

func (q *fakeHostQueue) PushHosted(ctx context.Context, entries ...storage.HostEntry) error {
	data := make([][]byte, len(entries))
	q.mu.Lock()
	for i, e := range entries {
		data[i] = e.Data
		if _, ok := q.hosts[e.Host]; !ok {
			q.hosts[e.Host] = time.Time{}
		}
	}
	q.mu.Unlock()
	return q.Push(ctx, data...)
}

func (q *fakeHostQueue) SetHostReady(_ context.Context, ready map[string]time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for h, t := range ready {
		if t.After(q.hosts[h]) {
			q.hosts[h] = t
		}
	}
	return nil
}

func (q *fakeHostQueue) LeaseHosts(context.Context, time.Time, int, int, time.Duration) ([]storage.Entry, error) {
	return nil, storage.ErrQueueEmpty
}

func (q *fakeHostQueue) Head(context.Context, int) ([]storage.HeadEntry, error) { return nil, nil }

// TestFill: fill pushes every entry under its host and sets every host's
// ready time ahead; a store without HostQueue is errNoHostQueue.
func TestFill(t *testing.T) {
	q := newFake()
	defer q.Close()
	if err := fill(t.Context(), q, 2500, 10, manyHosts); err != nil {
		t.Fatalf("fill: %v", err)
	}
	l, err := q.Len(t.Context())
	if err != nil || l.Total() != 2500 || len(q.hosts) != 2500 {
		t.Fatalf("after fill: %+v, %v, %d hosts; want 2500 entries of 2500 hosts", l, err, len(q.hosts))
	}
	for h, at := range q.hosts {
		if !at.After(time.Now()) {
			t.Fatalf("host %s ready at %v, want ahead of now", h, at)
		}
	}
	plain := storage.NewMemoryQueue(0)
	defer plain.Close()
	if err := fill(t.Context(), plain, 10, 10, manyHosts); !errors.Is(err, errNoHostQueue) {
		t.Errorf("fill(MemoryQueue) error = %v, want errNoHostQueue", err)
	}
}

// TestMeasureTable: measured on the heap, hosts cost the fake's map entries
// beyond their entries (a positive difference), and a store without
// HostQueue is named as not measured.
func TestMeasureTable(t *testing.T) {
	heap := store{name: "fake", how: "heap", bytes: func(_ context.Context, fill func(storage.Queue) error) (int64, error) {
		before := liveHeap()
		q := newFake()
		if err := fill(q); err != nil {
			return 0, err
		}
		after := liveHeap()
		q.Close()
		return after - before, nil
	}}
	res := measure(t.Context(), heap, 5000, 100)
	if res.err != nil || res.oneHost < 5000*100 || res.manyHosts-res.oneHost < 5000*32 {
		t.Fatalf("measure = %+v: want entries of 100 bytes and hosts costing at least a map slot and a name each", res)
	}
	mem := memStore()
	var b strings.Builder
	writeTable(&b, 5000, 100, []store{heap, mem}, []result{res, measure(t.Context(), mem, 10, 1)})
	out := b.String()
	perHost := fmt.Sprintf("| fake | %.0f | %.0f | %.0f | heap |", float64(res.manyHosts)/5000, float64(res.oneHost)/5000, float64(res.manyHosts-res.oneHost)/5000)
	if !strings.Contains(out, perHost) {
		t.Errorf("table lacks %q:\n%s", perHost, out)
	}
	if _, ok := storage.Queue(storage.NewMemoryQueue(0)).(storage.HostQueue); !ok && !strings.Contains(out, "not measured: *storage.MemoryQueue does not implement storage.HostQueue") {
		t.Errorf("table does not say the memory queue was not measured:\n%s", out)
	}
}

// TestUsedMemory: INFO memory's used_memory is read from a server's reply;
// a reply that is not a bulk string, or has no such field, is an error.
func TestUsedMemory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	info := "# Memory\r\nused_memory:1234567\r\nused_memory_human:1.18M\r\n"
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for range 5 { // *2, $4, INFO, $6, memory
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
		fmt.Fprintf(c, "$%d\r\n%s\r\n", len(info), info)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, err := usedMemory(ctx, ln.Addr().String())
	<-done
	if err != nil || got != 1234567 {
		t.Errorf("usedMemory = %d, %v; want 1234567", got, err)
	}
	for _, reply := range []string{"-ERR unknown command\r\n", "$10\r\nno_field:1\r\n"} {
		if _, err := parseUsedMemory(bufio.NewReader(strings.NewReader(reply))); err == nil {
			t.Errorf("parseUsedMemory(%q) error = nil, want one", reply)
		}
	}
}
