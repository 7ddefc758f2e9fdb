package magpie

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
)

// Context carries values from a request to its callbacks and, copied, to the
// requests that callbacks make with Request.Visit. Unlike Colly, each child
// request gets its own copy, so siblings never see each other's writes. The
// copy is made on write: a child shares its parent's values until either
// of them calls Put, so a link costs no copy of a Context nobody changes.
//
// The zero value is an empty Context, as NewContext returns. A Context is
// safe for concurrent use.
type Context struct {
	// mu guards m.
	mu sync.RWMutex
	// m is made by the first Put: most requests' contexts stay empty, and
	// every link's Visit clones one. While shared is set, other Contexts
	// may read m too: it is never written again, and the next Put works
	// on a copy.
	m map[string]any
	// shared is set by Clone (on both Contexts, under mu held for reading
	// by the source) and cleared by the Put that copies m (under mu).
	shared atomic.Bool
}

// NewContext returns an empty Context.
func NewContext() *Context {
	return &Context{}
}

// Put stores value under key, replacing any earlier value.
func (c *Context) Put(key string, value any) {
	c.mu.Lock()
	switch {
	case c.m == nil:
		c.m = make(map[string]any)
	case c.shared.Load():
		c.m = maps.Clone(c.m)
		c.shared.Store(false)
	}
	c.m[key] = value
	c.mu.Unlock()
}

// Get returns the value stored under key as a string: the string itself, the
// fmt %v form of any other value, or "" when the key is absent. Unlike Colly it
// never panics on a non-string value.
func (c *Context) Get(key string) string {
	c.mu.RLock()
	v, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// GetAny returns the value stored under key, or nil.
func (c *Context) GetAny(key string) any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[key]
}

// ForEach calls fn for every key and value and returns what fn returned, in no
// particular order. fn must not call methods of c that write.
func (c *Context) ForEach(fn func(k string, v any) any) []any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]any, 0, len(c.m))
	for k, v := range c.m {
		out = append(out, fn(k, v))
	}
	return out
}

// Clone returns a shallow copy: the values are shared, and a Put on either
// Context does not show in the other.
func (c *Context) Clone() *Context {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.m) == 0 {
		return &Context{}
	}
	c.shared.Store(true)
	n := &Context{m: c.m}
	n.shared.Store(true)
	return n
}

// Len returns the number of keys.
func (c *Context) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
