package render

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/magpiecrawl/magpie"
)

// skippedHeaders are request headers not handed to the browser: it sets
// them itself (Accept for a navigation, encodings, Host), the cookies come
// from the jar through the cookie store, the User-Agent goes through the
// user-agent override, and credentials would go to every host the page
// loads from.
var skippedHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Connection": true, "Content-Length": true, "Cookie": true,
	"Host": true, "User-Agent": true, "Authorization": true, "Proxy-Authorization": true,
}

// domScript serializes the document after scripts ran, with its doctype.
const domScript = `(() => {
	const d = document;
	let s = d.doctype ? new XMLSerializer().serializeToString(d.doctype) + "\n" : "";
	return s + (d.documentElement ? d.documentElement.outerHTML : "");
})()`

// load renders fr in t.
func (r *Renderer) load(ctx context.Context, b *browser, t *tab, fr *magpie.FetchRequest) (*magpie.FetchResult, error) {
	pctx, pcancel := context.WithTimeout(t.ctx, r.cfg.timeout)
	defer pcancel()
	stop := context.AfterFunc(ctx, pcancel)
	defer stop()
	fail := func(err error, step string) (*magpie.FetchResult, error) {
		return nil, r.classify(ctx, b, pctx, err, step)
	}
	if err := prepare(pctx, fr); err != nil {
		return fail(err, "preparing the tab")
	}

	st := &loadState{changed: make(chan struct{}, 1), inflight: make(map[network.RequestID]bool), sent: fr.Sent}
	lctx, lcancel := context.WithCancel(pctx)
	defer lcancel()
	if err := chromedp.Listen(lctx, st.event); err != nil {
		return fail(err, "listening to the tab")
	}
	nav, err := chromedp.Call(pctx, page.Navigate, page.NavigateParams{URL: fr.URL.String()})
	if err != nil {
		return fail(err, "navigating")
	}
	st.start(nav.FrameID, nav.LoaderID)
	if nav.ErrorText != "" {
		// A 4xx or 5xx without a body fails the navigation, but the
		// response arrived: report its status.
		if resp := st.response(); resp != nil {
			return result(fr, resp, nil, nil, http.Header{}), nil
		}
		return nil, navigationError(fmt.Sprintf("%s: %s", fr.URL, nav.ErrorText), nav.ErrorText)
	}
	if err := r.settle(pctx, st); err != nil {
		return fail(err, "waiting for the page to settle")
	}
	if r.cfg.selector != "" {
		if err := chromedp.Do(pctx, chromedp.WaitReady(chromedp.CSS(r.cfg.selector))); err != nil {
			return fail(err, fmt.Sprintf("waiting for %q", r.cfg.selector))
		}
	}
	resp, docID := st.document()
	var body []byte
	h := http.Header{}
	if resp == nil || isHTML(resp.MimeType) {
		s, err := chromedp.Run(pctx, chromedp.Evaluate[string](domScript))
		if err != nil {
			return fail(err, "reading the DOM")
		}
		body = []byte(s)
		h.Set("Content-Type", "text/html; charset=utf-8")
		if resp != nil && resp.MimeType != "" {
			h.Set("Content-Type", mime.FormatMediaType(resp.MimeType, map[string]string{"charset": "utf-8"}))
		}
	} else {
		rb, err := chromedp.Call(pctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: docID})
		if err != nil {
			return fail(err, "reading the response body")
		}
		body = rb.Body
		if rb.Base64encoded {
			if body, err = base64.StdEncoding.AppendDecode(nil, rb.Body); err != nil {
				return fail(err, "decoding the response body")
			}
		}
	}
	final := finalURL(fr.URL, resp)
	cks, err := chromedp.Call(pctx, network.GetCookies, network.GetCookiesParams{URLs: []string{final.String()}})
	if err != nil {
		return fail(err, "reading cookies")
	}
	return result(fr, resp, body, cks.Cookies, h), nil
}

// prepare resets the tab's cookies and headers for fr.
func prepare(ctx context.Context, fr *magpie.FetchRequest) error {
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		return err
	}
	if len(fr.Cookies) > 0 {
		params := make([]*network.CookieParam, 0, len(fr.Cookies))
		for _, c := range fr.Cookies {
			params = append(params, &network.CookieParam{Name: c.Name, Value: c.Value, URL: fr.URL.String(), Path: "/"})
		}
		if _, err := chromedp.Call(ctx, network.SetCookies, network.SetCookiesParams{Cookies: params}); err != nil {
			return err
		}
	}
	if ua := fr.Header.Get("User-Agent"); ua != "" {
		if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua}); err != nil {
			return err
		}
	}
	extra := network.Headers{}
	for k, vs := range fr.Header {
		if !skippedHeaders[http.CanonicalHeaderKey(k)] && len(vs) > 0 {
			extra[k] = strings.Join(vs, ", ")
		}
	}
	_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: extra})
	return err
}

// settle waits for the load event and, unless NetworkIdle is 0, for the
// page to go without a request in flight for the quiet period.
func (r *Renderer) settle(ctx context.Context, st *loadState) error {
	quiet := r.cfg.idle
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		loaded, idleSince, err := st.status()
		if err != nil {
			return err
		}
		var wake <-chan time.Time
		if loaded {
			if quiet == 0 {
				return nil
			}
			if !idleSince.IsZero() {
				left := quiet - time.Since(idleSince)
				if left <= 0 {
					return nil
				}
				if timer == nil {
					timer = time.NewTimer(left)
				} else {
					timer.Reset(left)
				}
				wake = timer.C
			}
		}
		select {
		case <-st.changed:
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// loadState follows one navigation through the tab's events, which arrive
// on chromedp's reading goroutine.
type loadState struct {
	// changed has a value when the state changed since it was last read.
	changed chan struct{}
	// sent reports the main document's first response byte.
	sent func(time.Time)

	// mu guards everything below.
	mu     sync.Mutex
	frame  cdp.FrameID
	loader cdp.LoaderID
	// early holds the events that came before the navigation's loader was
	// known.
	early    []any
	docID    network.RequestID
	resp     *network.Response
	docErr   string
	crashed  bool
	loaded   bool
	inflight map[network.RequestID]bool
	// idleSince is when the last request in flight finished (zero while
	// one is in flight).
	idleSince time.Time
}

// maxEarly bounds the events kept before the loader is known.
const maxEarly = 1024

// event is the Listen function: fast, no commands, no panics.
func (s *loadState) event(ev any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loader == "" {
		if len(s.early) < maxEarly {
			s.early = append(s.early, ev)
		}
		return
	}
	s.apply(ev)
}

// start records the navigation's frame and loader and replays the events
// that came before.
func (s *loadState) start(frame cdp.FrameID, loader cdp.LoaderID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frame, s.loader = frame, loader
	if loader == "" {
		// A same-document navigation (a fragment): nothing loads.
		s.loaded = true
		s.idleSince = time.Now()
	}
	for _, ev := range s.early {
		s.apply(ev)
	}
	s.early = nil
	s.notify()
}

// apply updates the state for one event; called with mu held.
func (s *loadState) apply(ev any) {
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.LoaderID != s.loader {
			return
		}
		if ev.Type == network.ResourceTypeDocument && ev.FrameID == s.frame {
			s.docID = ev.RequestID
		}
		s.inflight[ev.RequestID] = true
		s.idleSince = time.Time{}
	case *network.EventResponseReceived:
		if ev.RequestID == s.docID && s.docID != "" {
			s.resp = ev.Response
			if s.sent != nil {
				s.sent(time.Now())
			}
		}
	case *network.EventLoadingFinished:
		s.finished(ev.RequestID)
	case *network.EventLoadingFailed:
		if ev.RequestID == s.docID && s.docID != "" && s.resp == nil {
			s.docErr = ev.ErrorText
		}
		s.finished(ev.RequestID)
	case *page.EventLifecycleEvent:
		if ev.FrameID == s.frame && ev.LoaderID == s.loader && ev.Name == "load" {
			s.loaded = true
			if len(s.inflight) == 0 && s.idleSince.IsZero() {
				s.idleSince = time.Now()
			}
		}
	case *inspector.EventTargetCrashed:
		s.crashed = true
	default:
		return
	}
	s.notify()
}

// finished drops a request from those in flight; called with mu held.
func (s *loadState) finished(id network.RequestID) {
	if !s.inflight[id] {
		return
	}
	delete(s.inflight, id)
	if len(s.inflight) == 0 {
		s.idleSince = time.Now()
	}
}

// notify signals a change without blocking; called with mu held.
func (s *loadState) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// status returns whether the page loaded, since when nothing is in flight,
// and the error that ends the wait.
func (s *loadState) status() (loaded bool, idleSince time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.crashed:
		return false, time.Time{}, fmt.Errorf("%w: the page's renderer crashed", ErrBrowserCrashed)
	case s.docErr != "":
		return false, time.Time{}, navigationError(s.docErr, s.docErr)
	}
	return s.loaded, s.idleSince, nil
}

// response returns the main document's response, or nil.
func (s *loadState) response() *network.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp
}

// document returns the main document's response (or nil) and request ID.
func (s *loadState) document() (*network.Response, network.RequestID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp, s.docID
}

// navigationError is ErrNavigation with msg, and ErrCertificate too when
// the browser's error text names a certificate failure.
func navigationError(msg, errorText string) error {
	if strings.HasPrefix(errorText, "net::ERR_CERT_") {
		return fmt.Errorf("%w (%w): %s", ErrNavigation, ErrCertificate, msg)
	}
	return fmt.Errorf("%w: %s", ErrNavigation, msg)
}

// isHTML reports whether a document of this type is rendered as a DOM that
// outerHTML gives back.
func isHTML(mimeType string) bool {
	return mimeType == "" || mimeType == "text/html" || mimeType == "application/xhtml+xml"
}

// finalURL is the main document's URL after redirects.
func finalURL(req *url.URL, resp *network.Response) *url.URL {
	if resp != nil && resp.URL != "" {
		if u, err := url.Parse(resp.URL); err == nil {
			return u
		}
	}
	return req
}

// result builds the FetchResult; the response headers are those of the
// main document, less the ones describing its encoding on the wire, with
// h's on top.
func result(fr *magpie.FetchRequest, resp *network.Response, body []byte, cookies []*network.Cookie, h http.Header) *magpie.FetchResult {
	out := &magpie.FetchResult{StatusCode: http.StatusOK, Header: http.Header{}, Body: body, FinalURL: finalURL(fr.URL, resp)}
	if resp != nil {
		if resp.Status > 0 {
			out.StatusCode = int(resp.Status)
		}
		for k, v := range resp.Headers {
			s, ok := v.(string)
			if !ok {
				continue
			}
			// The protocol joins repeated headers with newlines.
			for line := range strings.SplitSeq(s, "\n") {
				out.Header.Add(k, line)
			}
		}
	}
	for _, k := range []string{"Content-Encoding", "Content-Length", "Transfer-Encoding"} {
		out.Header.Del(k)
	}
	for k, vs := range h {
		out.Header[k] = vs
	}
	for _, c := range cookies {
		out.Cookies = append(out.Cookies, httpCookie(c))
	}
	return out
}

// httpCookie converts a browser cookie for a cookie jar: a host-only cookie
// gets no Domain, a domain cookie its domain without the leading dot.
func httpCookie(c *network.Cookie) *http.Cookie {
	hc := &http.Cookie{Name: c.Name, Value: c.Value, Path: c.Path, Secure: c.Secure, HttpOnly: c.HTTPOnly}
	if d, ok := strings.CutPrefix(c.Domain, "."); ok {
		hc.Domain = d
	}
	if !c.Session && c.Expires > 0 {
		hc.Expires = time.Unix(int64(c.Expires), 0)
	}
	switch c.SameSite {
	case network.CookieSameSiteStrict:
		hc.SameSite = http.SameSiteStrictMode
	case network.CookieSameSiteLax:
		hc.SameSite = http.SameSiteLaxMode
	case network.CookieSameSiteNone:
		hc.SameSite = http.SameSiteNoneMode
	}
	return hc
}
