package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// prioritySite serves / linking to /p/0 … /p/n-1 and then to
// /important/0 … /important/k-1 (last on the page), pages that link
// nowhere, and records the order the pages are requested in (robots.txt:
// 404, not recorded).
type prioritySite struct {
	*httptest.Server
	mu    sync.Mutex
	order []string
}

func newPrioritySite(t *testing.T, n, k int) *prioritySite {
	t.Helper()
	s := &prioritySite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.order = append(s.order, r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>%s</title>", r.URL.Path)
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
			for i := range k {
				fmt.Fprintf(w, `<a href="/important/%d">important %d</a>`, i, i)
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *prioritySite) fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Issue 39 §2: --priority REGEX=N fetches the pages whose URL matches
// first, though the home page links to them last: with --parallel 1 and a
// --delay, the /important/ pages come before the 40 other pages but the
// first few, which the crawl took while the home page's links were still
// being read. The first matching pattern wins (/important/3 matches a
// pattern of priority -5 first, and comes last). Without --priority, the
// pages come in the order the home page links to them.
func TestCLIPriority(t *testing.T) {
	const others, important = 40, 5
	for _, prio := range []bool{true, false} {
		t.Run(fmt.Sprint("priority=", prio), func(t *testing.T) {
			s := newPrioritySite(t, others, important)
			args := []string{"crawl", s.URL + "/", "--allow-loopback", "-q", "-o", "-", "--parallel", "1", "--delay", "10ms"}
			if prio {
				args = append(args, "--priority", `/important/3$=-5`, "--priority", "/important/=10", "--priority", "/important/=-10")
			}
			r := cli(t, "", args...)
			if r.code != 0 {
				t.Fatalf("magpie %q: exit %d; stderr:\n%s", args, r.code, r.stderr)
			}
			if n := len(jsonLines(t, r.stdout)); n != 1+others+important {
				t.Errorf("%d items, want %d", n, 1+others+important)
			}
			order := s.fetched()
			pos := func(p string) int {
				i := slices.Index(order, p)
				if i < 0 {
					t.Fatalf("%s never fetched: %v", p, order)
				}
				return i
			}
			if !prio {
				for i := range important {
					if p, last := pos(fmt.Sprintf("/important/%d", i)), pos(fmt.Sprintf("/p/%d", others-1)); p < last {
						t.Errorf("/important/%d fetched at %d, before /p/%d at %d", i, p, others-1, last)
					}
				}
				return
			}
			for _, i := range []int{0, 1, 2, 4} {
				if p, later := pos(fmt.Sprintf("/important/%d", i)), pos("/p/20"); p > later {
					t.Errorf("/important/%d fetched at %d, after /p/20 at %d: %v", i, p, later, order)
				}
			}
			if p, last := pos("/important/3"), pos(fmt.Sprintf("/p/%d", others-1)); p < last {
				t.Errorf("/important/3 (priority -5) fetched at %d, before /p/%d at %d", p, others-1, last)
			}
		})
	}
}

// Issue 39 §2: a --priority without "=", with a pattern that does not
// compile, with an N that is no integer or outside the int32 range, and an
// --order other than breadth or depth, are usage errors (exit 2) naming
// the flag, before any request.
func TestCLIPriorityUsageErrors(t *testing.T) {
	s := newPrioritySite(t, 1, 0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--priority", "/important/"}, "want REGEX=N"},
		{[]string{"--priority", "=3"}, "the pattern is empty"},
		{[]string{"--priority", "/a(b=3"}, "missing closing )"},
		{[]string{"--priority", "/a=x"}, "N must be an integer"},
		{[]string{"--priority", "/a=2147483648"}, "N must be between -2147483648 and 2147483647"},
		{[]string{"--priority", "/a=-2147483649"}, "N must be between"},
		{[]string{"--order", "random"}, "want breadth or depth"},
	} {
		args := append([]string{"crawl", s.URL + "/", "--allow-loopback", "-q"}, tc.args...)
		r := cli(t, "", args...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		flag := tc.args[0]
		if r.code != 2 || !strings.Contains(first, flag) || !strings.Contains(first, tc.want) || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("magpie %q: exit %d, stderr:\n%s\nwant 2 and a first line naming %s and %q", tc.args, r.code, r.stderr, flag, tc.want)
		}
	}
	if got := s.fetched(); len(got) != 0 {
		t.Errorf("the usage errors fetched %v, want nothing", got)
	}
	// The pattern may hold "=": the number is after the last one; and
	// both orders are accepted.
	for _, extra := range [][]string{{"--priority", "/p/0?x=1=4"}, {"--order", "depth"}, {"--order", "breadth", "--priority", "/p/=1"}} {
		args := append([]string{"crawl", s.URL + "/", "--allow-loopback", "-q", "-o", "-"}, extra...)
		if r := cli(t, "", args...); r.code != 0 {
			t.Errorf("magpie %q: exit %d, stderr:\n%s", extra, r.code, r.stderr)
		}
	}
}

// Issue 39 §2: --order depth takes the deeper pages first, --order
// breadth the shallower: on a chain of pages, each linking to the next and
// then to 30 leaves, depth reaches the chain's end before the home page's
// last leaf (the next page of the chain waits behind the few pages the
// crawl took ahead, not behind every leaf found), breadth after it.
func TestCLIOrder(t *testing.T) {
	const leaves, chain = 30, 6
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		order = append(order, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/c/%d", &n); err == nil || r.URL.Path == "/" {
			if n < chain {
				fmt.Fprintf(w, `<a href="/c/%d">next</a>`, n+1)
			}
			for i := range leaves {
				fmt.Fprintf(w, `<a href="/leaf/%d/%d">leaf</a>`, n, i)
			}
		}
	}))
	defer srv.Close()
	last := fmt.Sprintf("/leaf/0/%d", leaves-1)
	end := fmt.Sprintf("/c/%d", chain)
	for _, o := range []string{"depth", "breadth"} {
		mu.Lock()
		order = nil
		mu.Unlock()
		args := []string{"crawl", srv.URL + "/", "--allow-loopback", "-q", "-o", "-", "--parallel", "1", "--delay", "2ms", "--order", o}
		if r := cli(t, "", args...); r.code != 0 {
			t.Fatalf("magpie %q: exit %d; stderr:\n%s", args, r.code, r.stderr)
		}
		mu.Lock()
		got := slices.Clone(order)
		mu.Unlock()
		e, l := slices.Index(got, end), slices.Index(got, last)
		if e < 0 || l < 0 || len(got) != 1+chain+(chain+1)*leaves {
			t.Fatalf("--order %s fetched %d pages: %v", o, len(got), got)
		}
		if o == "depth" && e > l {
			t.Errorf("--order depth: %s fetched at %d, after %s at %d: %v", end, e, last, l, got)
		}
		if o == "breadth" && e < l {
			t.Errorf("--order breadth: %s fetched at %d, before %s at %d: %v", end, e, last, l, got)
		}
	}
}
