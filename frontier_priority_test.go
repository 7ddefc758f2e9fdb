package magpie

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// prioTestReq is a request to u with priority p, as admission leaves it.
func prioTestReq(t *testing.T, c *Collector, u string, p int) *Request {
	t.Helper()
	req := pacedTestReq(t, c, u)
	req.Priority, req.prioritized = p, true
	return req
}

// pushAll pushes each "url@priority" to f.
func pushAll(t *testing.T, c *Collector, f *memFrontier, specs ...string) {
	t.Helper()
	for _, s := range specs {
		u, p, _ := strings.Cut(s, "@")
		var n int
		if p != "" {
			if _, err := fmt.Sscan(p, &n); err != nil {
				t.Fatalf("bad spec %q", s)
			}
		}
		if err := f.push(context.Background(), prioTestReq(t, c, u, n), time.Time{}); err != nil {
			t.Fatalf("push(%q) error = %v", s, err)
		}
	}
}

// TestFrontierPriorityOrder: the in-memory frontier hands out the highest
// priority first, within a host and across hosts, and requests of equal
// priority in the order they came (across hosts too); close returns what is
// left in that order.
func TestFrontierPriorityOrder(t *testing.T) {
	tests := []struct {
		name  string
		paced bool
		push  []string
		want  []string
	}{
		{
			name: "within a host",
			push: []string{"http://a.test/1", "http://a.test/2@5", "http://a.test/3", "http://a.test/4@5", "http://a.test/5@-1", "http://a.test/6@9"},
			want: []string{"http://a.test/6", "http://a.test/2", "http://a.test/4", "http://a.test/1", "http://a.test/3", "http://a.test/5"},
		},
		{
			name: "across hosts",
			push: []string{"http://a.test/1", "http://b.test/1@3", "http://c.test/1@1", "http://a.test/2@7", "http://b.test/2@3", "http://c.test/2@3"},
			want: []string{"http://a.test/2", "http://b.test/1", "http://b.test/2", "http://c.test/2", "http://c.test/1", "http://a.test/1"},
		},
		{
			name:  "across hosts, paced",
			paced: true,
			push:  []string{"http://a.test/1", "http://b.test/1@3", "http://c.test/1@1", "http://a.test/2@7", "http://b.test/2@3", "http://c.test/2@3"},
			want:  []string{"http://a.test/2", "http://b.test/1", "http://b.test/2", "http://c.test/2", "http://c.test/1", "http://a.test/1"},
		},
		{
			name: "all 0: arrival order across hosts",
			push: []string{"http://a.test/1", "http://b.test/1", "http://a.test/2", "http://c.test/1", "http://b.test/2"},
			want: []string{"http://a.test/1", "http://b.test/1", "http://a.test/2", "http://c.test/1", "http://b.test/2"},
		},
		{
			name: "equal priorities across hosts: arrival order",
			push: []string{"http://a.test/1@-4", "http://b.test/1@2", "http://a.test/2@2", "http://b.test/2@-4"},
			want: []string{"http://b.test/1", "http://a.test/2", "http://a.test/1", "http://b.test/2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCollector()
			for _, byClose := range []bool{false, true} {
				f := newMemFrontier(0)
				if tt.paced {
					f.pace(16, 256)
				}
				pushAll(t, c, f, tt.push...)
				var got []string
				if byClose {
					for _, r := range f.close() {
						got = append(got, r.URL.String())
					}
				} else {
					got = takeAll(f)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("order (close %v) = %v, want %v", byClose, got, tt.want)
				}
			}
		})
	}
}

// TestFrontierPriorityHeadMoves: a request pushed with a higher priority
// than its host's next one moves its host ahead of the hosts it now beats,
// and a host goes back to arrival order once its heap is spent.
func TestFrontierPriorityHeadMoves(t *testing.T) {
	c := NewCollector()
	f := newMemFrontier(0)
	pushAll(t, c, f, "http://a.test/1", "http://b.test/1", "http://b.test/2", "http://c.test/1")
	if r, _ := f.take(); r.URL.String() != "http://a.test/1" {
		t.Fatalf("first take = %v, want a.test/1", r.URL)
	}
	// c.test was behind b.test; its new request puts it in front.
	pushAll(t, c, f, "http://c.test/2@1")
	want := []string{"http://c.test/2", "http://b.test/1", "http://b.test/2", "http://c.test/1"}
	if got := takeAll(f); !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	// c.test's queue was a heap; empty, it is a FIFO again.
	pushAll(t, c, f, "http://c.test/3", "http://c.test/4", "http://c.test/5")
	f.mu.Lock()
	q := f.hosts["c.test"]
	heaped := q != nil && q.heaped
	f.mu.Unlock()
	if heaped {
		t.Error("a host whose requests share one priority is still a heap")
	}
	if got, want := takeAll(f), []string{"http://c.test/3", "http://c.test/4", "http://c.test/5"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestFrontierPriorityModel pushes and takes at random and compares the
// order with a plain sort: priority, then arrival.
func TestFrontierPriorityModel(t *testing.T) {
	c := NewCollector()
	rng := rand.New(rand.NewPCG(39, 2))
	for round := range 20 {
		f := newMemFrontier(0)
		type want struct {
			url  string
			prio int
			seq  int
		}
		var model []want
		seq := 0
		for step := range 600 {
			if rng.IntN(3) > 0 {
				seq++
				u := fmt.Sprintf("http://h%d.test/%d", rng.IntN(4), seq)
				p := 0
				if round > 0 { // round 0: every priority 0
					p = rng.IntN(5) - 2
				}
				pushAll(t, c, f, fmt.Sprintf("%s@%d", u, p))
				model = append(model, want{u, p, seq})
				continue
			}
			r, _ := f.take()
			if len(model) == 0 {
				if r != nil {
					t.Fatalf("round %d step %d: took %v from an empty frontier", round, step, r.URL)
				}
				continue
			}
			best := slices.MinFunc(model, func(a, b want) int {
				return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.seq, b.seq))
			})
			if r == nil || r.URL.String() != best.url || r.Priority != best.prio {
				t.Fatalf("round %d step %d: took %v, want %s (priority %d)", round, step, r, best.url, best.prio)
			}
			model = slices.DeleteFunc(model, func(w want) bool { return w.seq == best.seq })
		}
	}
}

// TestFrontierRetryKeepsPriority: a retry waiting for its not-before time
// comes back with its priority, ahead of the requests of lower priority
// that came while it waited.
func TestFrontierRetryKeepsPriority(t *testing.T) {
	c := NewCollector()
	f := newMemFrontier(0)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	pushAll(t, c, f, "http://a.test/first@4")
	r, _ := f.take()
	if err := f.retry(context.Background(), r, now.Add(time.Minute)); err != nil {
		t.Fatalf("retry() error = %v", err)
	}
	pushAll(t, c, f, "http://a.test/low@1", "http://b.test/low@3")
	if got := takeAll(f); !slices.Equal(got, []string{"http://b.test/low", "http://a.test/low"}) {
		t.Fatalf("taken while the retry waits = %v", got)
	}
	pushAll(t, c, f, "http://a.test/later@1", "http://b.test/later@3")
	now = now.Add(time.Minute)
	want := []string{"http://a.test/first", "http://b.test/later", "http://a.test/later"}
	var got []string
	for {
		r, _ := f.take()
		if r == nil {
			break
		}
		got = append(got, r.URL.String())
		if r.URL.Path == "/first" && (r.Priority != 4 || r.attempt != 2) {
			t.Errorf("retry: Priority %d, attempt %d; want 4 and 2", r.Priority, r.attempt)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("order once the retry is due = %v, want %v", got, want)
	}
}

// TestFrontierRankedPacing: once a request with a priority came, a host
// with its share of requests out waits for their starts even while the
// gate has room, so that what it finds later, ranked higher, waits behind
// no more than that share; without priorities it fills the room, as
// before.
func TestFrontierRankedPacing(t *testing.T) {
	for _, ranked := range []bool{false, true} {
		t.Run(fmt.Sprint("ranked=", ranked), func(t *testing.T) {
			c := NewCollector()
			f := newMemFrontier(0)
			f.pace(2, 8)
			p := 0
			if ranked {
				p = 1
			}
			for i := range 6 {
				pushAll(t, c, f, fmt.Sprintf("http://a.test/%d@%d", i, p))
			}
			got := len(takeAll(f))
			want := 6
			if ranked {
				want = 2
			}
			if got != want {
				t.Fatalf("taken = %d, want %d", got, want)
			}
			if ranked {
				pushAll(t, c, f, "http://a.test/top@9")
				f.started("a.test")
				if got := takeAll(f); !slices.Equal(got, []string{"http://a.test/top"}) {
					t.Errorf("taken after one start = %v, want [http://a.test/top]", got)
				}
			}
		})
	}
}

// TestPendingPriority: a compact link keeps its priority, pendingReq stays
// 64 bytes, and a link too deep for its 16-bit depth waits as itself.
func TestPendingPriority(t *testing.T) {
	if n := unsafe.Sizeof(pendingReq{}); n != 64 {
		t.Errorf("pendingReq is %d bytes, want 64", n)
	}
	c := NewCollector()
	base, _ := url.Parse("http://example.com/")
	f := newMemFrontier(0)
	req := pendingTestLink(t, c, base, "/a")
	req.Priority, req.prioritized = -32768-7, true
	p := f.compact(req)
	if p.full != nil {
		t.Fatal("compact kept the full request")
	}
	if got := p.request(); got.Priority != req.Priority || !got.prioritized {
		t.Errorf("Priority %d, prioritized %v after the round trip; want %d, true", got.Priority, got.prioritized, req.Priority)
	}
	for _, depth := range []int{32768, -32769} {
		deep := pendingTestLink(t, c, base, "/deep")
		deep.Depth, deep.Priority = depth, 3
		if p := f.compact(deep); p.full != deep || p.prio != 3 {
			t.Errorf("depth %d: compact gave full %v, prio %d; want the request itself, prio 3", depth, p.full == deep, p.prio)
		}
	}
	if got := f.compact(pendingTestLink(t, c, base, "/shallow")); got.full != nil || got.depth != 3 {
		t.Errorf("a link at depth 3 waits full (%v) or at depth %d", got.full != nil, got.depth)
	}
}
