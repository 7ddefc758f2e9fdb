package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xmlquery"
	"github.com/magpiecrawl/magpie/internal/urlkey"
	"golang.org/x/net/html"
)

// analyze is the analysis stage of one response: OnError, or OnResponse,
// OnHTML, OnXML and OnScraped; then the request is finished. Children that
// callbacks admit are counted before their parent finishes, so the crawl
// cannot look idle in between.
func (c *Collector) analyze(r *run, resp *Response) []item {
	req := resp.Request
	if resp.aborted {
		r.finish(req, nil)
		return nil
	}
	if resp.err != nil {
		if pending, ok := errors.AsType[*robotsPendingError](resp.err); ok && r.waitRobots(resp, pending.Until) {
			return nil
		}
		if rf, ok := errors.AsType[*refusedInFetch](resp.err); ok {
			c.deliverRefusal(req, rf.err)
			r.finish(req, rf.err)
			return nil
		}
		if r.maybeRetry(resp) {
			return nil
		}
		err := resp.err
		if req.attempt > 1 {
			err = &RetryError{Attempts: req.attempt, Err: err}
		}
		if c.debugEnabled() {
			c.logger.Debug("request failed", "url", req.URL.Redacted(), "method", req.Method, "status", resp.StatusCode, "request_id", req.ID, "err", err)
		}
		c.handleOnError(resp, err)
		if values := resp.takeItems(); len(values) > 0 {
			// Items OnError emitted (a failed page recorded as one, a
			// recrawl's gone page) are delivered like a page's; the request
			// then finishes with err.
			return r.holdForItems(resp, err, values)
		}
		resp.releaseBody()
		r.finish(req, err)
		return nil
	}
	if c.debugEnabled() {
		c.logger.Debug("response", "url", req.URL.Redacted(), "method", req.Method, "status", resp.StatusCode, "depth", req.Depth, "request_id", req.ID)
	}
	if req.sitemap {
		err := c.readSitemap(r.cfg, resp)
		resp.releaseBody()
		r.finish(req, err)
		return nil
	}
	err := c.runResponseCallbacks(resp, r.cfg.streamHTML)
	r.noteLinks(req)
	if values := resp.takeItems(); len(values) > 0 {
		// The page finishes, and ReuseBody takes its buffer back, when its
		// items are through the pipelines (processItem).
		return r.holdForItems(resp, err, values)
	}
	// The callbacks have returned, on this goroutine, even those of a
	// request finished as stuck: nothing of the collector's reads the body
	// after this.
	resp.releaseBody()
	r.finish(req, err)
	return nil
}

// runResponseCallbacks runs OnResponse, OnHTML, OnXML and OnScraped for a
// successful response. Every error goes to OnError; the first is returned.
func (c *Collector) runResponseCallbacks(resp *Response, stream bool) error {
	cbs := c.snapshotCallbacks()
	var firstErr error
	report := func(err error) {
		if err == nil {
			return
		}
		if firstErr == nil {
			firstErr = err
		}
		c.handleOnError(resp, err)
	}
	if c.debugging() {
		c.emit(evResponse, resp.Request, responseValues(resp, nil))
	}
	for _, f := range cbs.response {
		report(c.safelyAt(resp.Request, &labelOnResponse, func() { f(resp) }))
	}
	c.runDocumentCallbacks(cbs, resp, stream, report)
	if c.debugging() {
		c.emit(evScraped, resp.Request, map[string]string{"url": logURL(resp.Request)})
	}
	for _, f := range cbs.scraped {
		report(c.safelyAt(resp.Request, &labelOnScraped, func() { f(resp) }))
	}
	if slices.ContainsFunc(cbs.html, func(cb *htmlCallback) bool { return cb.detached.Load() }) ||
		slices.ContainsFunc(cbs.xml, func(cb *xmlCallback) bool { return cb.detached.Load() }) {
		c.purgeDetached()
	}
	return firstErr
}

// baseHrefMatcher finds the <base href> that relative links resolve against;
// compiled once, as goquery's Find would compile it for every page.
var baseHrefMatcher = cascadia.MustCompile("base[href]")

// matchTree returns the nodes below root that m matches, in document order,
// as goquery's Find gives them (m is tried on the subtrees of root's element
// children). With findBase it also returns the first <base href> below root
// (nil if none), as cascadia.Query would find it, in the same walk instead
// of one more over the whole page. The slice is the elements' own: it starts
// with room for a page's worth of matches, where Find grows it match by
// match and then copies it.
func matchTree(root *html.Node, m cascadia.Selector, findBase bool) (matched []*html.Node, base *html.Node) {
	for n := root.FirstChild; n != nil; {
		if findBase && base == nil && baseHrefMatcher(n) {
			base = n
		}
		if (n.Parent != root || n.Type == html.ElementNode) && m(n) {
			if matched == nil {
				matched = make([]*html.Node, 0, 16)
			}
			matched = append(matched, n)
		}
		// Pre-order: down, else on, else up until a next sibling.
		if n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != root && n.NextSibling == nil {
			n = n.Parent
		}
		if n == root {
			break
		}
		n = n.NextSibling
	}
	return matched, base
}

// runDocumentCallbacks runs OnHTML and OnXML. An HTML body is streamed
// (StreamHTML) or parsed once and shared by goquery and htmlquery; XML
// bodies go to xmlquery.
func (c *Collector) runDocumentCallbacks(cbs *callbacks, resp *Response, stream bool, report func(error)) {
	if len(cbs.html) == 0 && len(cbs.xml) == 0 {
		return
	}
	ct := ""
	if resp.Headers != nil {
		ct = strings.ToLower(resp.Headers.Get("Content-Type"))
	}
	if ct == "" {
		ct = http.DetectContentType(resp.Body)
	}
	path := strings.ToLower(resp.Request.URL.Path)
	isHTML := strings.Contains(ct, "text/html") || strings.Contains(ct, "application/xhtml+xml")
	isXML := !isHTML && (strings.Contains(ct, "xml") || strings.HasSuffix(path, ".xml") || strings.HasSuffix(path, ".xml.gz"))
	switch {
	case isHTML:
		c.runHTMLCallbacks(cbs, resp, stream, report)
	case isXML && len(cbs.xml) > 0:
		doc, err := xmlquery.Parse(bytes.NewReader(resp.Body))
		if err != nil {
			report(fmt.Errorf("parsing XML: %w", err))
			return
		}
		for _, cb := range cbs.xml {
			runXML(c, cb, resp, xmlquery.QuerySelectorAll(doc, cb.expr), NewXMLElementFromXMLNode, report)
		}
	}
}

// runHTMLCallbacks runs OnHTML and OnXML on an HTML page: on what the
// streamer matched when the page streams, else on its tree.
func (c *Collector) runHTMLCallbacks(cbs *callbacks, resp *Response, stream bool, report func(error)) {
	req := resp.Request
	streamTried := stream && cbs.streamTags != nil && len(cbs.xml) == 0
	if streamTried {
		if page, ok := streamHTML(resp.Body, cbs.html, cbs.streamTags); ok {
			c.counts.streamed.Add(1)
			c.runStreamed(cbs, resp, page, report)
			return
		}
		c.counts.parsedWhole.Add(1)
	}
	root, err := parseHTMLPage(resp, streamTried)
	if err != nil {
		report(fmt.Errorf("parsing HTML: %w", err))
		return
	}
	doc := goquery.NewDocumentFromNode(root)
	if len(cbs.html) == 0 {
		// OnXML alone: its elements' links resolve against <base> too.
		if base := cascadia.Query(root, baseHrefMatcher); base != nil {
			href, _ := attrOf(base.Attr, "href")
			setBase(req, href)
		}
	}
	for k, cb := range cbs.html {
		// Each callback's elements are found when its turn comes, after
		// the callbacks before it ran (and perhaps changed the tree), as
		// doc.Find would find them; the first walk also finds <base>.
		matched, base := matchTree(root, cb.matcher, k == 0)
		if base != nil {
			href, _ := attrOf(base.Attr, "href")
			setBase(req, href)
		}
		els := newElements(doc, matched)
		for i := range matched {
			if cb.detached.Load() {
				break
			}
			e := els.at(i, resp)
			if c.debugging() {
				c.emit(evHTML, req, map[string]string{"selector": cb.selector, "url": logURL(req)})
			}
			report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
		}
	}
	for _, cb := range cbs.xml {
		runXML(c, cb, resp, htmlquery.QuerySelectorAll(root, cb.expr), NewXMLElementFromHTMLNode, report)
	}
}

// parseHTMLPage builds resp's whole tree. The streamer builds it where it
// is html.Parse's (streamTree); a page the streamer just gave up on
// (streamTried) would almost always make it give up again, so that one goes
// to html.Parse at once.
func parseHTMLPage(resp *Response, streamTried bool) (*html.Node, error) {
	if !streamTried {
		if root, built := streamTree(resp.Body); built {
			return root, nil
		}
	}
	root, err := html.Parse(bytes.NewReader(resp.Body))
	if err != nil {
		// x/net/html refuses more than 512 open elements; browsers render
		// such pages, so parse them again flattened.
		root, err = html.Parse(bytes.NewReader(flattenHTML(resp.Body, maxHTMLNesting)))
		resp.Flattened = err == nil
	}
	return root, err
}

// runXML runs the OnXML callback cb on each of nodes in order, made an
// XMLElement by element.
func runXML[N any](c *Collector, cb *xmlCallback, resp *Response, nodes []N, element func(*Response, N) *XMLElement, report func(error)) {
	req := resp.Request
	for i, n := range nodes {
		if cb.detached.Load() {
			break
		}
		e := element(resp, n)
		if c.debugging() {
			c.emit(evXML, req, map[string]string{"selector": cb.query, "url": logURL(req)})
		}
		e.Index = i
		report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
	}
}

// setBase makes href, a <base href>, what req's relative links resolve
// against. It is resolved as a browser does: the WHATWG parser drops tabs
// and newlines inside the href, which net/url refuses.
func setBase(req *Request, href string) {
	if b, err := urlkey.Resolve(req.URL, strings.TrimSpace(href)); err == nil {
		req.baseURL = b
	}
}

// runStreamed runs the OnHTML callbacks on what streamHTML matched, in the
// order the parsed document would give: callback by callback, each over its
// elements in document order.
func (c *Collector) runStreamed(cbs *callbacks, resp *Response, page streamPage, report func(error)) {
	req := resp.Request
	if page.hasBase {
		setBase(req, page.base)
	}
	// The matched elements have no document: they share one whose root is
	// an empty document node (see StreamHTML), cut from the page's slab.
	doc := goquery.NewDocumentFromNode(page.root)
	for k, cb := range cbs.html {
		els := newElements(doc, page.matches[k])
		for i := range page.matches[k] {
			if cb.detached.Load() {
				break
			}
			e := els.at(i, resp)
			if c.debugging() {
				c.emit(evHTML, req, map[string]string{"selector": cb.selector, "url": logURL(req)})
			}
			report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
		}
	}
}

// elements are one callback's HTMLElements on one page, with their DOM
// selections, cut from one slab instead of two or three allocations an
// element. Nothing is reused: a callback that keeps an element keeps the
// slab alive, and everything it holds stays valid.
type elements struct {
	doc   *goquery.Document
	nodes []*html.Node
	slab  []struct {
		e   HTMLElement
		sel goquery.Selection
	}
}

// newElements makes the slab for the elements of nodes, whose selections
// belong to doc.
func newElements(doc *goquery.Document, nodes []*html.Node) elements {
	els := elements{doc: doc, nodes: nodes}
	if len(nodes) > 0 {
		els.slab = make([]struct {
			e   HTMLElement
			sel goquery.Selection
		}, len(nodes))
	}
	return els
}

// at fills and returns the element of nodes[i] as
// NewHTMLElementFromSelectionNode would make it from the one-node selection
// goquery's Each gives: the selection's node slice is nodes[i:i+1], capped
// so that an append to it copies.
func (els *elements) at(i int, resp *Response) *HTMLElement {
	x := &els.slab[i]
	x.sel = *els.doc.Selection
	x.sel.Nodes = els.nodes[i : i+1 : i+1]
	x.e.init(resp, &x.sel, els.nodes[i], i)
	return &x.e
}

// analyze is the scheduler's parser: it runs the response callbacks and
// finishes the request.
func (r *run) analyze(_ context.Context, resp *Response, _ io.Reader) ([]item, []error) {
	req := resp.Request
	switch {
	case req.finished.Load():
		return nil, nil // abandoned in the download stage
	case errors.Is(resp.err, errNotStarted):
		r.finish(req, resp.err)
		return nil, nil
	}
	g, ok := r.guardAnalysis(resp)
	if ok && g.exitErr != nil {
		// runtime.Goexit in a callback (or an escaped panic, a bug):
		// the request never reached finish.
		r.abandon(req, resp, g.exitErr)
		return nil, nil
	}
	if !ok {
		return nil, nil // finished as stuck
	}
	return g.items, nil
}

// analyzeLeftovers runs the callbacks of responses that were downloaded
// completely but not analyzed when the run stopped, so that a stopped queue
// run does not fetch them again when it resumes. Their entries are then
// acknowledged; the rest of the leftovers are released by front.close.
func (r *run) analyzeLeftovers() {
	for _, resp := range r.sched.Leftovers().Responses {
		if resp == nil || resp.err != nil || resp.aborted {
			continue
		}
		r.guardAnalysis(resp)
	}
}
