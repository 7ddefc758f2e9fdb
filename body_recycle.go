package magpie

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A page's body is the largest allocation a crawl makes per page, and
// Colly's contract lets a caller keep Response.Body for as long as it
// likes, so the collector cannot hand the buffer back itself (ReuseBody is
// the opt-in that lets it). What it can do is reuse a buffer once the
// garbage collector has found that nothing reaches it any more: each body
// buffer carries a finalizer that puts it on a free list instead of
// letting it be freed, and the next body of that size class is read into
// it. A kept body, or any slice of it, keeps its buffer reachable, so it
// is never reused under its keeper.
//
// The free lists hold at most recycleBudget bytes; a buffer that finds
// them full is left to be freed. A buffer no read takes within two
// collections is dropped (see tick), so that a crawl that has ended leaves
// nothing held.
//
// runtime.SetFinalizer, not runtime.AddCleanup: a cleanup may not reach its
// object, and reusing the buffer is the point.
const (
	// recycleClass is the granularity of recycled buffers' sizes.
	recycleClass = 2 << 10
	// minRecycled and maxRecycled bound the bodies read into recycled
	// buffers: a smaller one is not worth a finalizer, a larger one is
	// rare and would hold its size.
	minRecycled = 4 << 10
	maxRecycled = maxPresize
	// recycleBudget is the most bytes the free lists hold.
	recycleBudget = 8 << 20
	// armedBudget is the most bytes of buffers carrying a finalizer at
	// once: in a page's hands, or dead and not yet finalized. A buffer
	// with a finalizer outlives its death by a collection, and counts as
	// live heap in that collection, so arming more buffers than the lists
	// can take would only grow the heap. Bodies a program keeps stay
	// armed: one that keeps them all stops recycling once it keeps this
	// many bytes.
	armedBudget = recycleBudget + 2<<20
)

const recycleClasses = maxRecycled/recycleClass + 2

// bodyRecycler is the free lists of recycled body buffers, by class (a
// buffer of class k has k*recycleClass bytes). The lists of a generation
// are dropped at the second collection after it began (tick), so that a
// buffer no read wants is freed within two collections.
type bodyRecycler struct {
	mu sync.Mutex
	// cur holds the buffers put since the last collection, old those put
	// in the interval before; get prefers cur.
	cur, old [recycleClasses][][]byte
	bytes    int // in cur and old
	// ticking is set while a collection sentinel is armed (see tick).
	ticking bool
	// armed is the bytes of buffers carrying a finalizer.
	armed atomic.Int64
	// reused counts the buffers get returned, for tests.
	reused int
	// arm, when not nil, replaces armTick (tests tick by hand).
	arm func()
}

var recycledBodies bodyRecycler

// bodyFinalizers[k] returns a buffer of class k to the free lists: one
// function per class, so that arming a buffer allocates no closure.
var bodyFinalizers [recycleClasses]func(*byte)

func init() {
	for k := range bodyFinalizers {
		size := k * recycleClass
		bodyFinalizers[k] = func(p *byte) {
			recycledBodies.armed.Add(-int64(size))
			recycledBodies.put(k, unsafe.Slice(p, size))
		}
	}
}

// put adds b, of class k, to the free lists unless they are full.
func (r *bodyRecycler) put(k int, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bytes+len(b) > recycleBudget {
		return
	}
	r.cur[k] = append(r.cur[k], b)
	r.bytes += len(b)
	if !r.ticking {
		r.ticking = true
		r.armTick()
	}
}

// get takes a buffer of class k, or returns nil.
func (r *bodyRecycler) get(k int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lists := range []*[recycleClasses][][]byte{&r.cur, &r.old} {
		l := lists[k]
		if len(l) == 0 {
			continue
		}
		b := l[len(l)-1]
		l[len(l)-1] = nil
		lists[k] = l[:len(l)-1]
		r.bytes -= len(b)
		r.reused++
		return b
	}
	return nil
}

// tick runs after each collection while the lists hold buffers: the old
// generation is dropped and the current one becomes old.
func (r *bodyRecycler) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bytes = 0
	for k := range r.cur {
		r.old[k] = r.cur[k]
		r.cur[k] = nil
		for _, b := range r.old[k] {
			r.bytes += len(b)
		}
	}
	if r.bytes == 0 {
		r.ticking = false
		return
	}
	r.armTick()
}

// gcSentinel is an object made only to be collected: its finalizer tells
// the recycler that a collection happened. It has a pointer field so that
// it is never placed in a tiny block, whose finalizers may not run.
type gcSentinel struct{ _ *byte }

// armTick makes a sentinel whose finalizer calls r.tick after the next
// collection.
func (r *bodyRecycler) armTick() {
	if r.arm != nil {
		r.arm()
		return
	}
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) { r.tick() })
}

// noRecycle, set by tests only, makes newBodyBuffer allocate every buffer
// afresh, as a read did before bodies were recycled.
var noRecycle atomic.Bool

// newBodyBuffer returns an empty buffer with room for at least n bytes, to
// read a body into: a recycled one when n is in the recycled range.
func newBodyBuffer(n int) []byte {
	if n < minRecycled || n > maxRecycled || noRecycle.Load() {
		return make([]byte, 0, n)
	}
	k := (n + recycleClass - 1) / recycleClass
	size := k * recycleClass
	b := recycledBodies.get(k)
	if b == nil {
		if recycledBodies.armed.Load()+int64(size) > armedBudget {
			return make([]byte, 0, size)
		}
		b = make([]byte, size)
	}
	recycledBodies.armed.Add(int64(size))
	runtime.SetFinalizer(&b[0], bodyFinalizers[k])
	return b[:0]
}

// finishBody clears what lies between a body read into a buffer from
// newBodyBuffer and the buffer's end: a recycled buffer holds an earlier
// page there, which a caller reslicing Response.Body up to its capacity
// must not see.
func finishBody(b []byte) []byte {
	clear(b[len(b):cap(b)])
	return b
}
