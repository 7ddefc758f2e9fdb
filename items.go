package magpie

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Item is one scraped record on its way through the item pipelines.
type Item struct {
	// Value is what the callback emitted; processors may replace it.
	Value any
	// Request is the request of the page that emitted it (URL, Depth, Ctx).
	Request *Request
	// Change is the page's Response.Change in recrawl mode (Recrawl).
	Change Change
}

// ItemProcessor handles one item in a pipeline. Returning an error that
// wraps ErrDropItem drops the item (counted, not an error); any other error
// fails it (counted, and reported to OnError with the page's response and an
// *ItemError). A panic in a processor fails the item too.
type ItemProcessor func(ctx context.Context, it *Item) error

// ItemError is reported to OnError when an item pipeline fails an item.
type ItemError struct {
	// Item is the item that failed, as the failing processor saw it.
	Item *Item
	// Pipeline is the index of the pipeline, in the order Pipeline added them.
	Pipeline int
	// Err is the processor's error.
	Err error
}

func (e *ItemError) Error() string {
	return fmt.Sprintf("item pipeline %d: %v", e.Pipeline, e.Err)
}

func (e *ItemError) Unwrap() error { return e.Err }

// Pipeline adds an item pipeline: procs run in order on every item that
// callbacks emit (Response.Emit, HTMLElement.Emit, XMLElement.Emit), and the
// first that drops or fails the item stops it in this pipeline. Each
// pipeline sees every item, in the order pipelines were added. Items travel
// through the engine's item stage, not the callbacks' goroutines: a slow
// pipeline slows the crawl (the stage's buffer is bounded), and in a queue
// run a page's entry is acknowledged only after all its items have passed
// the pipelines (at-least-once). Safe to call before a crawl starts.
func (c *Collector) Pipeline(procs ...ItemProcessor) {
	c.itemMu.Lock()
	defer c.itemMu.Unlock()
	c.pipelines = append(c.pipelines[:len(c.pipelines):len(c.pipelines)], procs)
}

// Emit sends v, a scraped record of any type, to the item pipelines. Items
// of one page keep the order of their Emit calls. OnError may emit too (to
// record a failed page as an item); its items go through the pipelines
// like a page's.
func (r *Response) Emit(v any) {
	r.itemMu.Lock()
	r.items = append(r.items, v)
	r.itemMu.Unlock()
}

// Emit sends v to the item pipelines, as Response.Emit does.
func (e *HTMLElement) Emit(v any) { e.Response.Emit(v) }

// Emit sends v to the item pipelines, as Response.Emit does.
func (e *XMLElement) Emit(v any) { e.Response.Emit(v) }

// takeItems returns the items emitted so far and forgets them.
func (r *Response) takeItems() []any {
	r.itemMu.Lock()
	defer r.itemMu.Unlock()
	items := r.items
	r.items = nil
	return items
}

// itemCounts are the item outcomes, for Stats.
type itemCounts struct {
	scraped, dropped, failed atomic.Uint64
}

// item is the engine's item: one emitted value and the page it came from.
type item struct {
	value any
	page  *itemPage
}

// itemPage holds a page back from finishing until its items are through.
type itemPage struct {
	resp *Response
	err  error // the page's own outcome, from its callbacks
	left atomic.Int32
}

// holdForItems turns a page's emitted values into engine items; the page
// finishes when the last of them has passed the pipelines.
func (r *run) holdForItems(resp *Response, err error, values []any) []item {
	p := &itemPage{resp: resp, err: err}
	p.left.Store(int32(len(values)))
	out := make([]item, len(values))
	for i, v := range values {
		out[i] = item{value: v, page: p}
	}
	return out
}

// processItem is the engine's pipeline stage: it runs the user's pipelines
// on one item and finishes its page after its last item.
func (r *run) processItem(ctx context.Context, it item) (item, error) {
	c := r.c
	c.itemMu.Lock()
	pipelines := c.pipelines
	c.itemMu.Unlock()
	resp := it.page.resp
	outcome := &c.items.scraped
	for i, procs := range pipelines {
		cur := &Item{Value: it.value, Request: resp.Request, Change: resp.Change}
		for _, proc := range procs {
			var err error
			if perr := c.safely("item pipeline", func() { err = proc(ctx, cur) }); perr != nil {
				err = perr
			}
			if err == nil {
				continue
			}
			if errors.Is(err, ErrDropItem) {
				if outcome == &c.items.scraped {
					outcome = &c.items.dropped
				}
			} else {
				outcome = &c.items.failed
				ierr := &ItemError{Item: cur, Pipeline: i, Err: err}
				c.newRegion(func(token uint64) { c.handleOnErrorAs(resp, token, ierr) })
			}
			break
		}
	}
	outcome.Add(1)
	if it.page.left.Add(-1) == 0 {
		// Every item of the page has passed: its callbacks returned before
		// the items left them, so nothing of the collector's reads the body
		// any more.
		resp.releaseBody()
		r.finish(resp.Request, it.page.err)
	}
	return it, nil
}

// itemState is what a Collector keeps for items; embedded so that the
// Collector's field list stays readable.
type itemState struct {
	// itemMu guards pipelines.
	itemMu    sync.Mutex
	pipelines [][]ItemProcessor
	items     itemCounts
}
