package magpie

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"
)

// BenchmarkMemFrontier pushes the links of pages over 100 hosts into the
// in-memory frontier and takes them out again, 64 at a time while pushing
// (a crawl's steady state), then the rest: all at priority 0 (every crawl
// that sets none), and at five priorities; as compact links (which are
// made into Requests again as they leave) and as full requests (the
// frontier's own work alone).
func BenchmarkMemFrontier(b *testing.B) {
	const links = 10000
	c := NewCollector()
	base, _ := url.Parse("http://example.com/")
	for _, tc := range []struct{ ranked, compact bool }{{false, true}, {false, false}, {true, true}, {true, false}} {
		ranked, compact := tc.ranked, tc.compact
		b.Run(fmt.Sprintf("ranked=%v/compact=%v", ranked, compact), func(b *testing.B) {
			reqs := make([]*Request, links)
			for i := range reqs {
				r := pendingTestLink(&testing.T{}, c, base, fmt.Sprintf("http://h%d.test/p/%d", i%100, i))
				r.pendingLink = compact
				if ranked {
					r.Priority = i%5 - 2
				}
				reqs[i] = r
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				f := newMemFrontier(0)
				f.pace(16, 256)
				out := 0
				for i, r := range reqs {
					if err := f.push(ctx, r, time.Time{}); err != nil {
						b.Fatal(err)
					}
					if i%2 == 1 {
						if r, _ := f.take(); r != nil {
							f.started(r.URL.Host)
							out++
						}
					}
				}
				for {
					r, _ := f.take()
					if r == nil {
						break
					}
					f.started(r.URL.Host)
					out++
				}
				if out != links {
					b.Fatalf("took %d, want %d", out, links)
				}
			}
		})
	}
}
