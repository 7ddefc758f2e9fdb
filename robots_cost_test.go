package magpie

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// wildcardRobots is a robots.txt of about size bytes whose rules each have
// wildcards "*"+sep, then "$".
func wildcardRobots(size, wildcards int, sep string) []byte {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Disallow: /p%d", i)
		for range wildcards {
			b.WriteString("*" + sep)
		}
		b.WriteString("$\n")
	}
	return []byte(b.String())
}

// heapGrowth returns how much more heap f's result holds once f returns.
func heapGrowth(f func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// medianHeapGrowth is the median of n heapGrowth measurements of f.
func medianHeapGrowth(n int, f func() any) int64 {
	g := make([]int64, n)
	for i := range g {
		g[i] = heapGrowth(f)
	}
	slices.Sort(g)
	return g[n/2]
}

// TestRobotsCostCoversRuleShapes: what the robots cache charges for a parsed
// robots.txt is at least the heap the parsed file holds, whatever the shape
// of its rules (a flat charge per rule undercounts rules with many
// wildcards 10 to 20 times), and not wildly more.
func TestRobotsCostCoversRuleShapes(t *testing.T) {
	shapes := []struct {
		wildcards int
		sep       string
	}{{1, "a"}, {20, "x"}, {100, "x"}, {100, ""}, {20, "abcdefgh"}}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%d wildcards %q", sh.wildcards, sh.sep), func(t *testing.T) {
			body := wildcardRobots(128<<10, sh.wildcards, sh.sep)
			// The median of several measurements: a goroutine a previous
			// test left finishing (a server's connection, a timer) may
			// allocate or free during one of them on a loaded machine.
			grown := medianHeapGrowth(5, func() any { return parseRobots(200, body) })
			cost := int64(robotsCost(body))
			// 5% for the measurement's noise; the estimate is meant to be above.
			if cost < grown*95/100 {
				t.Errorf("robotsCost = %d KiB, heap held by the parsed file = %d KiB: the cache's bound does not hold", cost>>10, grown>>10)
			}
			if cost > 2*grown+1<<20 {
				t.Errorf("robotsCost = %d KiB for %d KiB of heap: overcharged", cost>>10, grown>>10)
			}
		})
	}
}

// TestRobotsCostBoundsOneFile: a robots.txt that would cost more than
// maxRobotsFileCost parsed (rules of 100 wildcards; thousands of user
// agents before thousands of rules, each rule then referenced from each
// agent) is parsed only as far as the bound allows: the rules before the cut
// apply, the cache charges and the heap holds at most the bound.
func TestRobotsCostBoundsOneFile(t *testing.T) {
	var agents strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&agents, "User-agent: bot%d\n", i)
	}
	agents.WriteString("User-agent: magpie\nDisallow: /first\n")
	for i := 0; agents.Len() < 490<<10; i++ {
		fmt.Fprintf(&agents, "Disallow: /%d\n", i)
	}
	wild := wildcardRobots(490<<10, 100, "x")
	wild = append([]byte("User-agent: magpie\nDisallow: /first\n"), wild...)
	for name, body := range map[string][]byte{"many wildcards": wild, "many agents": []byte(agents.String())} {
		t.Run(name, func(t *testing.T) {
			if c := robotsCost(body); c <= maxRobotsFileCost {
				t.Fatalf("robotsCost = %d MiB, want a file over the %d MiB bound", c>>20, maxRobotsFileCost>>20)
			}
			rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
				return 200, body, nil
			})
			var allowed bool
			var err error
			grown := heapGrowth(func() any {
				allowed, _, err = rc.check(t.Context(), &url.URL{Scheme: "http", Host: "h", Path: "/first"}, "magpie")
				return rc
			})
			if err != nil || allowed {
				t.Errorf("check(/first) = %v, %v; want refused by the first rule", allowed, err)
			}
			rc.mu.Lock()
			charged := rc.bytes
			rc.mu.Unlock()
			if charged > maxRobotsFileCost {
				t.Errorf("the cache charged %d MiB, want at most %d MiB", charged>>20, maxRobotsFileCost>>20)
			}
			if grown > int64(maxRobotsFileCost)*105/100 {
				t.Errorf("the parsed file holds %d MiB of heap, want at most %d MiB", grown>>20, maxRobotsFileCost>>20)
			}
		})
	}
}
