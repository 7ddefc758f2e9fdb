package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// TestMemFrontierHead: the head lists the frontier's requests in the order
// take hands them out, across hosts and within each, whatever was taken
// already, and takes nothing.
func TestMemFrontierHead(t *testing.T) {
	for _, ranked := range []bool{false, true} {
		t.Run(fmt.Sprintf("ranked=%v", ranked), func(t *testing.T) { memFrontierHead(t, ranked) })
	}
}

// memFrontierHead checks head against take; ranked gives the requests
// priorities, so hosts' queues become heaps and hosts go by priority.
func memFrontierHead(t *testing.T, ranked bool) {
	f := newMemFrontier(0)
	var want []string
	for i := range 40 {
		u := fmt.Sprintf("http://h%d.example/p%d", (i*7)%5, i)
		r := &Request{URL: mustParse(t, u), Method: http.MethodGet, Depth: 1}
		if ranked {
			r.Priority = (i * 3) % 4
		}
		if err := f.push(t.Context(), r, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for taken := 0; taken < 40; taken += 9 {
		head := f.head(100)
		if len(head) != 40-taken {
			t.Fatalf("after %d taken: head lists %d, want %d", taken, len(head), 40-taken)
		}
		for _, k := range []int{1, 3, 10} {
			if got := f.head(k); !slices.Equal(got, head[:min(k, len(head))]) {
				t.Errorf("head(%d) = %v, not the first of head(100)", k, got)
			}
		}
		want = want[:0]
		for range min(9, 40-taken) {
			r, _ := f.take()
			want = append(want, r.URL.String())
		}
		for i, u := range want {
			if head[i].URL != u || head[i].Host != mustParse(t, u).Host || head[i].Method != http.MethodGet {
				t.Fatalf("after %d taken: head[%d] = %+v, take gave %s", taken, i, head[i], u)
			}
		}
	}
}

// fifoQueue hides every method of a queue but storage.Queue's: a FIFO
// store such as a Colly queue storage, with no hosts and no Head.
type fifoQueue struct{ storage.Queue }

// TestFrontierHeadQueueRun: a paused queue run lists the requests its gate
// holds, then its queue's Head, decoded; over a queue without Head the
// error wraps storage.ErrUnsupported. No crawl: ErrNoCrawl.
func TestFrontierHeadQueueRun(t *testing.T) {
	c := NewCollector(IgnoreRobotsTxt())
	if _, err := c.FrontierHead(t.Context(), 5); !errors.Is(err, ErrNoCrawl) {
		t.Errorf("FrontierHead without a crawl: %v, want ErrNoCrawl", err)
	}
	for _, hosted := range []bool{true, false} {
		t.Run(fmt.Sprint("hosted=", hosted), func(t *testing.T) {
			s := newPauseSite(t, 1)
			var q storage.Queue = storage.NewMemoryQueue(0)
			if !hosted {
				q = fifoQueue{q}
			}
			pushURL(t, q, s.URL+"/p/0")
			c := NewCollector(IgnoreRobotsTxt())
			held := pausedSignal(c)
			c.Pause()
			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- c.RunQueue(ctx, q, 1) }()
			waitHeld(t, held, s)
			if err := c.AddSeed(s.URL + "/p/1"); err != nil {
				t.Fatal(err)
			}
			head, err := c.FrontierHead(t.Context(), 10)
			if hosted {
				if err != nil {
					t.Fatalf("FrontierHead() error = %v", err)
				}
				if len(head) != 1 || head[0].URL != s.URL+"/p/1" || head[0].Host != mustParse(t, s.URL).Host || head[0].Method != http.MethodGet {
					t.Errorf("FrontierHead() = %+v, want /p/1 from the queue's Head", head)
				}
			} else if !errors.Is(err, storage.ErrUnsupported) {
				t.Errorf("FrontierHead() over a plain queue: %v, want ErrUnsupported", err)
			}
			cancel()
			c.Resume()
			<-ran
		})
	}
}

// TestFrontierHeadMemory: a paused in-memory crawl lists the requests it
// will start, in the order they were visited (the one the engine holds
// for Resume is not waiting any more), from the gate and the frontier.
func TestFrontierHeadMemory(t *testing.T) {
	s := newPauseSite(t, 1)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	held := pausedSignal(c)
	c.Pause()
	for i := range 6 {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", s.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	waitHeld(t, held, s)
	deadline := time.Now().Add(10 * time.Second)
	var head []HeadEntry
	for {
		var err error
		head, err = c.FrontierHead(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		// A request moving from the frontier to the gate is in neither
		// for a moment.
		if len(head) == 5 || time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
	}
	var got []string
	for _, h := range head {
		got = append(got, h.URL)
	}
	var want []string
	for i := 1; i < 6; i++ {
		want = append(want, fmt.Sprintf("%s/p/%d", s.URL, i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("FrontierHead() URLs = %q, want %q", got, want)
	}
	if h, _ := c.FrontierHead(t.Context(), 2); len(h) != 2 {
		t.Errorf("FrontierHead(2) listed %d", len(h))
	}
	close(s.release)
	c.Resume()
	c.Wait()
}
