package magpie

import (
	"slices"
	"testing"
)

// TestLinkSlabsFollowThePages: a page's first link slab has room for as
// many links as the run's last page had; past it, each slab doubles the
// page's; every link gets its own slot; and the page's count becomes the
// run's hint.
func TestLinkSlabsFollowThePages(t *testing.T) {
	r := &run{}
	r.linkHint.Store(10)
	req := &Request{}
	req.run = r
	slots := map[*visitedLink]bool{}
	var sizes []int
	var last *linkSlab
	for range 45 {
		slab, x := req.linkSlot()
		if slots[x] {
			t.Fatal("a slot was handed out twice")
		}
		slots[x] = true
		if slab != last {
			sizes = append(sizes, len(slab.links))
			last = slab
		}
	}
	if want := []int{10, 10, 20, 40}; !slices.Equal(sizes, want) {
		t.Errorf("slab sizes %v, want %v", sizes, want)
	}
	r.noteLinks(req)
	if got := r.linkHint.Load(); got != 45 {
		t.Errorf("hint after a page of 45 links: %d", got)
	}
	first := &Request{}
	first.run = &run{}
	if slab, _ := first.linkSlot(); len(slab.links) != minLinkSlab {
		t.Errorf("first slab of a run's first page: %d links, want %d", len(slab.links), minLinkSlab)
	}
}

// TestSlabSize: a page's next node or attribute slab is what the last
// page's count says is left, else as many as the page has cut, within its
// bounds.
func TestSlabSize(t *testing.T) {
	for _, c := range []struct{ hint, built, least, most, want int }{
		{0, 0, 8, 256, 8},      // no hint: the least
		{10, 0, 8, 256, 10},    // the hint
		{10, 7, 8, 256, 8},     // little left: the least
		{10, 10, 8, 256, 10},   // past the hint: double
		{10, 100, 8, 256, 100}, // double
		{10, 900, 8, 256, 256}, // bounded
		{5000, 0, 8, 256, 256}, // a huge last page: bounded
	} {
		if got := slabSize(c.hint, c.built, c.least, c.most); got != c.want {
			t.Errorf("slabSize(%d, %d, %d, %d) = %d, want %d", c.hint, c.built, c.least, c.most, got, c.want)
		}
	}
}
