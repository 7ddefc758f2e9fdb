package limits

import (
	"cmp"
	"slices"
)

// Peek calls f, under the Gate's lock, for up to n of the items parked in
// it, the first put first, with their hosts' keys; a host's Delay, and
// the turns hosts take, decide the order they start in. It is a view for
// people watching a crawl: f must be quick, must not keep v past its
// return (the Gate hands it out once f has returned), and must not call
// the Gate. It costs a look at each host with items parked.
func (g *Gate[T]) Peek(n int, f func(host string, v T)) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	type parked struct {
		host string
		it   item[T]
	}
	var all []parked
	for key, h := range g.hosts {
		q := &h.q
		for i := range min(q.n, n) {
			all = append(all, parked{key, q.buf[(q.head+i)%len(q.buf)]})
		}
	}
	slices.SortFunc(all, func(a, b parked) int { return cmp.Compare(a.it.seq, b.it.seq) })
	for _, p := range all[:min(n, len(all))] {
		f(p.host, p.it.v)
	}
}
