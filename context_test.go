package magpie

import (
	"strconv"
	"sync"
	"testing"
)

// TestContextCloneCopiesOnWrite: a clone and its source share their values
// until one of them writes, and no write shows in the other, whichever
// writes first and however deep the clones go.
func TestContextCloneCopiesOnWrite(t *testing.T) {
	parent := NewContext()
	parent.Put("a", "1")
	child := parent.Clone()
	grandchild := child.Clone()
	sibling := parent.Clone()

	parent.Put("a", "parent")
	child.Put("b", "child")
	grandchild.Put("a", "grandchild")

	checks := []struct {
		name string
		ctx  *Context
		a, b string
		n    int
	}{
		{"parent", parent, "parent", "", 1},
		{"child", child, "1", "child", 2},
		{"grandchild", grandchild, "grandchild", "", 1},
		{"sibling", sibling, "1", "", 1},
	}
	for _, c := range checks {
		if got := c.ctx.Get("a"); got != c.a {
			t.Errorf("%s.Get(a) = %q, want %q", c.name, got, c.a)
		}
		if got := c.ctx.Get("b"); got != c.b {
			t.Errorf("%s.Get(b) = %q, want %q", c.name, got, c.b)
		}
		if got := c.ctx.Len(); got != c.n {
			t.Errorf("%s.Len() = %d, want %d", c.name, got, c.n)
		}
	}
}

// TestContextCloneConcurrent: clones taken while the source is written
// never see a later write and never race (go test -race).
func TestContextCloneConcurrent(t *testing.T) {
	parent := NewContext()
	parent.Put("k", 0)
	var wg sync.WaitGroup
	clones := make(chan *Context, 100)
	wg.Go(func() {
		for i := range 100 {
			parent.Put("k", i)
		}
	})
	wg.Go(func() {
		for range 100 {
			c := parent.Clone()
			c.Put("own", true)
			clones <- c
		}
		close(clones)
	})
	// Each write of the loop has its own key: a clone taken after an
	// earlier round's write rightly holds that one.
	i := 0
	for c := range clones {
		before := c.GetAny("k")
		late := "late" + strconv.Itoa(i)
		i++
		parent.Put(late, 1)
		if c.GetAny("k") != before || c.GetAny(late) != nil {
			t.Fatalf("a clone saw a write made after it was taken")
		}
	}
	wg.Wait()
	if parent.GetAny("own") != nil {
		t.Error("the source saw a clone's write")
	}
}
