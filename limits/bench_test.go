package limits

import (
	"fmt"
	"testing"
)

// BenchmarkUnlimited is the hot path of a fast crawl: a host no rule
// matches goes Put → Get → Done.
func BenchmarkUnlimited(b *testing.B) {
	g := NewGate[int](New(), 1024)
	ctx := b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := g.Put(ctx, "example.com:443", i); err != nil {
			b.Fatal(err)
		}
		_, t, err := g.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.Done(Result{StatusCode: 200})
	}
}

// BenchmarkLimited100Hosts keeps 100 limited hosts (Parallelism 1, a shared
// TotalParallelism) busy with parked work: every Get picks the next ready
// host and every Done readies it again.
func BenchmarkLimited100Hosts(b *testing.B) {
	l := New()
	if err := l.Add(&Rule{DomainGlob: "*.example.com", Parallelism: 1, TotalParallelism: 50}); err != nil {
		b.Fatal(err)
	}
	g := NewGate[int](l, 1024)
	ctx := b.Context()
	hosts := make([]string, 100)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example.com:443", i)
		for j := range 4 {
			if err := g.Put(ctx, hosts[i], i*4+j); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		v, t, err := g.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.Done(Result{StatusCode: 200})
		if err := g.Put(ctx, hosts[v/4], v); err != nil {
			b.Fatal(err)
		}
	}
}
