package main

import (
	"encoding/json"
	"slices"

	"github.com/magpiecrawl/magpie"
)

// The pages that link to a failed URL, for --errors: the library takes a
// URL once, and refuses the other links to it as already visited, often
// before the URL has failed; the refusals name the pages that hold them.

// maxReferrers is how many pages that link to a failed URL --errors names.
const maxReferrers = 10

// referrers are the pages found linking to one URL: the first maxReferrers
// in the order found, and a count of the others, each page once.
type referrers struct {
	pages []string
	more  int
	// seen holds the hashes of every page counted, once pages is full.
	seen map[uint64]struct{}
}

// add counts page; it reports whether it was new.
func (r *referrers) add(page string) bool {
	if page == "" || slices.Contains(r.pages, page) {
		return false
	}
	if len(r.pages) < maxReferrers {
		r.pages = append(r.pages, page)
		return true
	}
	if r.seen == nil {
		r.seen = make(map[uint64]struct{}, 2*maxReferrers)
		for _, p := range r.pages {
			r.seen[urlHash(p)] = struct{}{}
		}
	}
	h := urlHash(page)
	if _, dup := r.seen[h]; dup {
		return false
	}
	r.seen[h] = struct{}{}
	r.more++
	return true
}

// maxPendingLinks bounds linkLog.pending: the URLs linked again before
// they finished (and, in a resumed --state crawl, those a previous run
// fetched, which this one never sees finish).
const maxPendingLinks = 100_000

// linkLog follows, for --errors, the pages that link to each URL: a link to
// a URL already taken is refused as visited, often before the URL has
// failed, so the pages found linking to a URL not yet finished wait in
// pending. Guarded by failures.mu.
type linkLog struct {
	// done holds the URLs fetched: links to them are not kept.
	done map[uint64]struct{}
	// pending holds the pages linking to URLs not finished yet.
	pending map[uint64]*referrers
	// failed maps a failed URL to its record.
	failed map[uint64]int
	// records are this run's --errors lines in the order they failed;
	// dirty is set when one gained a page since it was written.
	records []*failureRecord
	dirty   bool
}

// failureRecord is a failure and the pages linking to its URL.
type failureRecord struct {
	f    failure
	refs referrers
}

// line is the record's --errors line.
func (r *failureRecord) line() ([]byte, error) {
	f := r.f
	f.LinkedFrom, f.LinkedFromMore = slices.Clone(r.refs.pages), r.refs.more
	return json.Marshal(f)
}

// responseKeys are the hashes of the URLs r answered for: its own, and
// those that redirected to it.
func responseKeys(r *magpie.Response) []uint64 {
	var keys []uint64
	if r == nil {
		return nil
	}
	if r.Request != nil && r.Request.URL != nil {
		keys = append(keys, urlHash(r.Request.URL.String()))
	}
	for _, u := range r.Redirects {
		keys = append(keys, urlHash(u.String()))
	}
	return keys
}

// fetched notes that r's URL was fetched: links to it are not kept.
func (fl *failures) fetched(r *magpie.Response) {
	if fl.log == nil {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	l := &fl.links
	if l.done == nil {
		l.done = map[uint64]struct{}{}
	}
	for _, k := range responseKeys(r) {
		l.done[k] = struct{}{}
		delete(l.pending, k)
	}
}

// linkedAgain notes a link to r's URL refused as already visited: the page
// that holds it links to the URL too.
func (fl *failures) linkedAgain(r *magpie.Request) {
	if r != nil && r.URL != nil {
		fl.linked(r.URL.String(), r.ParentURL())
	}
}

// linked notes that the page from links to the URL u.
func (fl *failures) linked(u, from string) {
	if fl.log == nil || from == "" {
		return
	}
	k := urlHash(u)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	l := &fl.links
	if _, ok := l.done[k]; ok {
		return
	}
	if i, ok := l.failed[k]; ok {
		if l.records[i].refs.add(from) {
			l.dirty = true
		}
		return
	}
	p := l.pending[k]
	if p == nil {
		if len(l.pending) >= maxPendingLinks {
			return
		}
		if l.pending == nil {
			l.pending = map[uint64]*referrers{}
		}
		p = &referrers{}
		l.pending[k] = p
	}
	p.add(from)
}

// failedRecord keeps f as the record of the URLs keys, with the pages found
// linking to them so far; fl.mu is held.
func (fl *failures) failedRecord(keys []uint64, f failure) *failureRecord {
	rec := &failureRecord{f: f}
	rec.refs.add(f.From)
	l := &fl.links
	if l.failed == nil {
		l.failed = map[uint64]int{}
	}
	for _, k := range keys {
		if p := l.pending[k]; p != nil {
			for _, page := range p.pages {
				rec.refs.add(page)
			}
			rec.refs.more += p.more
			delete(l.pending, k)
		}
		l.failed[k] = len(l.records)
	}
	l.records = append(l.records, rec)
	return rec
}
