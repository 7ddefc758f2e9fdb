package magpie

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func mustParse(t testing.TB, u string) *url.URL {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAbsoluteURL(t *testing.T) {
	r := &Request{URL: mustParse(t, "http://h/dir/page?q=1")}
	tests := []struct{ in, want string }{
		{"other", "http://h/dir/other"},
		{"/root", "http://h/root"},
		{"#frag", ""},
		{"  #frag", ""},
		// The fragment is kept, as Colly keeps it; visited keys drop it.
		{"http://x/y#z", "http://x/y#z"},
		// Hrefs are read as browsers read them (WHATWG URL).
		{"%zz", "http://h/dir/%25zz"},
		{"a\tb\nc", "http://h/dir/abc"},
		{"  spaced.html  ", "http://h/dir/spaced.html"},
		{"..\\up\\file", "http://h/up/file"},
		{"x.html#%_sec_6.2", "http://h/dir/x.html#%25_sec_6.2"},
		{"http://BÜCHER.example/", "http://xn--bcher-kva.example/"},
		{"http://[::1", ""},
	}
	for _, tt := range tests {
		if got := r.AbsoluteURL(tt.in); got != tt.want {
			t.Errorf("AbsoluteURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBaseHref(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var got string
	c.OnHTML("a", func(e *HTMLElement) { got = e.Request.AbsoluteURL(e.DOM.AttrOr("href", "")) })
	if err := c.Visit(ts.URL + "/base"); err != nil {
		t.Fatal(err)
	}
	if want := ts.URL + "/sub/page"; got != want {
		t.Errorf("AbsoluteURL with <base href> = %q, want %q", got, want)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	c := NewCollector()
	ctx := NewContext()
	ctx.Put("k", "v")
	h := http.Header{"X-A": {"1"}}
	r := &Request{URL: mustParse(t, "http://h/p?q=1"), Method: "POST", Depth: 3, Body: strings.NewReader("body"), Ctx: ctx, Headers: &h, Host: "vh", Priority: -12}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r.Body); string(rest) != "body" {
		t.Errorf("body after Marshal = %q, want %q", rest, "body")
	}
	u, err := c.UnmarshalRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(u.Body)
	if u.URL.String() != r.URL.String() || u.Method != "POST" || u.Depth != 3 || string(body) != "body" ||
		u.Ctx.Get("k") != "v" || u.Headers.Get("X-A") != "1" || u.Host != "vh" || u.Priority != -12 {
		t.Errorf("UnmarshalRequest = %+v, want the marshalled request", u)
	}
	if _, err := c.UnmarshalRequest([]byte("{")); !errors.Is(err, ErrUndecodableRequest) {
		t.Errorf("UnmarshalRequest(garbage) error = %v, want ErrUndecodableRequest", err)
	}
}

func TestPostAndMultipart(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(AllowURLRevisit())
	var bodies []string
	c.OnResponse(func(r *Response) { bodies = append(bodies, string(r.Body)) })
	if err := c.Post(ts.URL+"/post", map[string]string{"name": "form"}); err != nil {
		t.Fatal(err)
	}
	if err := c.PostMultipart(ts.URL+"/post", map[string][]byte{"name": []byte("multi")}); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 || bodies[0] != "POST name=form" || bodies[1] != "POST name=multi" {
		t.Errorf("bodies = %q", bodies)
	}
	if ok, _ := c.HasPosted(ts.URL+"/post", map[string]string{"name": "form"}); !ok {
		// AllowURLRevisit skips marking; check with a normal collector below.
		t.Log("HasPosted is false with AllowURLRevisit, as expected")
	}
	c2 := NewCollector()
	_ = c2.Post(ts.URL+"/post", map[string]string{"name": "x"})
	if ok, err := c2.HasPosted(ts.URL+"/post", map[string]string{"name": "x"}); !ok || err != nil {
		t.Errorf("HasPosted = %v, %v; want true", ok, err)
	}
	if ok, _ := c2.HasPosted(ts.URL+"/post", map[string]string{"name": "y"}); ok {
		t.Error("HasPosted with another body = true, want false")
	}
}

func TestCallbackOrderAndAbort(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var order []string
	c.OnRequest(func(*Request) { order = append(order, "request") })
	c.OnRequestHeaders(func(*Request) { order = append(order, "requestHeaders") })
	c.OnResponseHeaders(func(*Response) { order = append(order, "responseHeaders") })
	c.OnResponse(func(*Response) { order = append(order, "response") })
	c.OnHTML("title", func(*HTMLElement) { order = append(order, "html") })
	c.OnXML("//title", func(*XMLElement) { order = append(order, "xml") })
	c.OnScraped(func(*Response) { order = append(order, "scraped") })
	if err := c.Visit(ts.URL + "/html"); err != nil {
		t.Fatal(err)
	}
	want := "request requestHeaders responseHeaders response html xml scraped"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("callback order = %q, want %q", got, want)
	}

	tests := []struct {
		name    string
		setup   func(c *Collector)
		wantErr error
	}{
		{"OnRequest", func(c *Collector) { c.OnRequest(func(r *Request) { r.Abort() }) }, nil},
		{"OnRequestHeaders", func(c *Collector) { c.OnRequestHeaders(func(r *Request) { r.Abort() }) }, ErrAbortedBeforeRequest},
		{"OnResponseHeaders", func(c *Collector) { c.OnResponseHeaders(func(r *Response) { r.Request.Abort() }) }, ErrAbortedAfterHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCollector()
			tt.setup(c)
			var responses, errs atomic.Int32
			c.OnResponse(func(*Response) { responses.Add(1) })
			c.OnError(func(*Response, error) { errs.Add(1) })
			err := c.Visit(ts.URL + "/leaf?abort=" + tt.name)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Visit error = %v, want %v", err, tt.wantErr)
			}
			if responses.Load() != 0 {
				t.Error("OnResponse ran for an aborted request")
			}
			if want := int32(0); tt.wantErr != nil {
				want = 1
				if errs.Load() != want {
					t.Errorf("OnError calls = %d, want %d", errs.Load(), want)
				}
			} else if errs.Load() != want {
				t.Errorf("OnError calls = %d, want %d", errs.Load(), want)
			}
		})
	}
}

func TestOnXMLDocumentAndDetach(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(AllowURLRevisit())
	var items []string
	c.OnXML("//item", func(e *XMLElement) { items = append(items, e.Text) })
	var n int
	c.OnHTML("p", func(*HTMLElement) { n++ })
	if err := c.Visit(ts.URL + "/xml"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(items, ",") != "1,2" {
		t.Errorf("OnXML items = %q, want 1,2", items)
	}
	_ = c.Visit(ts.URL + "/html")
	c.OnHTMLDetach("p")
	_ = c.Visit(ts.URL + "/html")
	if n != 2 {
		t.Errorf("OnHTML calls = %d, want 2 (detached before the second visit)", n)
	}
}

func TestInvalidSelectorPanicsAtRegistration(t *testing.T) {
	for _, f := range []func(c *Collector){
		func(c *Collector) { c.OnHTML("a[", func(*HTMLElement) {}) },
		func(c *Collector) { c.OnXML("//a[", func(*XMLElement) {}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("registering an invalid selector did not panic")
				}
			}()
			f(NewCollector())
		}()
	}
}

func TestParseHTTPErrorResponseAndCookies(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(ParseHTTPErrorResponse())
	var status int
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path == "/404" {
			status = r.StatusCode
		}
	})
	var got string
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path == "/getcookie" {
			got = string(r.Body)
		}
	})
	if err := c.Visit(ts.URL + "/404"); err != nil || status != 404 {
		t.Errorf("Visit(/404) with ParseHTTPErrorResponse = %v, status %d; want nil, 404", err, status)
	}
	_ = c.Visit(ts.URL + "/setcookie")
	_ = c.Visit(ts.URL + "/getcookie")
	if got != "s1" {
		t.Errorf("cookie sent back = %q, want s1", got)
	}
	if cs := c.Cookies(ts.URL); len(cs) != 1 || cs[0].Value != "s1" {
		t.Errorf("Cookies() = %v, want session=s1", cs)
	}
	c.DisableCookies()
	if err := c.SetCookies(ts.URL, nil); !errors.Is(err, ErrNoCookieJar) {
		t.Errorf("SetCookies without jar error = %v, want ErrNoCookieJar", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(RetryPolicy(RetryOptions{MaxAttempts: 3, BaseDelay: 1, MaxDelay: 2}))
	var got error
	c.OnError(func(r *Response, err error) { got = err })
	err := c.Visit(ts.URL + "/500")
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.As(got, &re) {
		t.Errorf("Visit(/500) error = %v, OnError %v; want *RetryError with 3 attempts", err, got)
	}
	if n := ts.count("/500"); n != 3 {
		t.Errorf("/500 fetched %d times, want 3", n)
	}
	if err := c.Visit(ts.URL + "/404"); errors.As(err, &re) {
		t.Errorf("Visit(/404) error = %v, want no retry", err)
	}
}

func TestRequestRetry(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var tries atomic.Int32
	c.OnError(func(r *Response, err error) {
		if tries.Add(1) < 3 {
			if err := r.Request.Retry(); err != nil {
				t.Errorf("Retry() error = %v", err)
			}
		}
	})
	_ = c.Visit(ts.URL + "/404")
	c.Wait()
	if n := ts.count("/404"); n != 3 {
		t.Errorf("/404 fetched %d times, want 3", n)
	}
	r := &Request{Body: io.NopCloser(strings.NewReader("x")), collector: c}
	if err := r.Retry(); !errors.Is(err, ErrRetryBodyUnseekable) {
		t.Errorf("Retry() with unseekable body error = %v, want ErrRetryBodyUnseekable", err)
	}
}

// TestBrowserStyleHrefsAreCrawled: links that browsers follow but net/url
// refuses (a tab inside, a lone %, a bad escape in the fragment, spaces
// around, backslashes) are crawled.
func TestBrowserStyleHrefsAreCrawled(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.EscapedPath()]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, "<a href=\"ta\tb.html\">1</a><a href=\"100%.html\">2</a><a href=\"x.html#%_sec_6.2\">3</a>"+
				"<a href=\"  spaced.html  \">4</a><a href=\"dir\\back.html\">5</a><a href=\"#top\">6</a>")
		}
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var refused []error
	c.OnRefused(func(_ *Request, err error) { refused = append(refused, err) })
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/tab.html", "/100%25.html", "/x.html", "/spaced.html", "/dir/back.html"} {
		if hits[p] != 1 {
			t.Errorf("%s fetched %d times, want 1 (hits %v)", p, hits[p], hits)
		}
	}
	if len(refused) != 0 || c.Stats().FragmentLinks != 1 {
		t.Errorf("refusals %v, fragment links %d; want none and 1", refused, c.Stats().FragmentLinks)
	}
}

// TestMarshalCompact checks that a queue entry carries only what is set:
// no ID, no Method for a GET, no empty Context, headers, host or body.
func TestMarshalCompact(t *testing.T) {
	r := &Request{URL: mustParse(t, "http://h/p?a=1&b=2"), Method: http.MethodGet, Depth: 1, Ctx: NewContext(), Headers: &http.Header{}, ID: 77}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"URL":"http://h/p?a=1&b=2","Depth":1}`; string(b) != want {
		t.Errorf("Marshal() = %s, want %s", b, want)
	}
	// A request of the crawl keeps its bookkeeping.
	r.Method = http.MethodPost
	r.bodyBytes = []byte{}
	r.checkRevisit, r.entry.admitted, r.marked, r.attempt = true, true, true, 2
	r.parentURL = "http://h/"
	r.Priority = 5
	b, err = r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"URL":"http://h/p?a=1&b=2","Method":"POST","Depth":1,"Body":"","Attempt":2,"CheckRevisit":true,"Admitted":true,"Marked":true,"Parent":"http://h/","Priority":5}`; string(b) != want {
		t.Errorf("Marshal() = %s, want %s", b, want)
	}
}

// TestUnmarshalEarlierEntry decodes entries in the form earlier versions
// stored in SQLite and Redis (every field written, ID included): they must
// decode as they did, and marshal again to the compact form.
func TestUnmarshalEarlierEntry(t *testing.T) {
	c := NewCollector()
	old := `{"URL":"http://127.0.0.1:8080/p/12?x=1","Method":"GET","Depth":2,"Body":null,"ID":4711,` +
		`"Ctx":{"k":"v"},"Headers":{"X-A":["1","2"]},"Host":"","CheckRevisit":true,"Parent":"http://127.0.0.1:8080/"}`
	r, err := c.UnmarshalRequest([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if r.URL.String() != "http://127.0.0.1:8080/p/12?x=1" || r.Method != http.MethodGet || r.Depth != 2 || r.Body != nil ||
		r.Ctx.Get("k") != "v" || !slices.Equal(r.Headers.Values("X-A"), []string{"1", "2"}) || r.Host != "" ||
		!r.checkRevisit || r.ParentURL() != "http://127.0.0.1:8080/" || r.attempt != 1 || r.ID == 4711 || r.Priority != 0 {
		t.Errorf("UnmarshalRequest(earlier entry) = %+v", r)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"URL":"http://127.0.0.1:8080/p/12?x=1","Depth":2,"Ctx":{"k":"v"},"Headers":{"X-A":["1","2"]},"Attempt":1,"CheckRevisit":true,"Parent":"http://127.0.0.1:8080/"}`; string(b) != want {
		t.Errorf("Marshal() of the decoded entry = %s\nwant %s", b, want)
	}
	// An earlier POST with an empty body and an empty-string Host.
	r, err = c.UnmarshalRequest([]byte(`{"URL":"http://h/f","Method":"POST","Depth":1,"Body":"","ID":1,"Ctx":{},"Headers":{},"Host":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != http.MethodPost || r.Body == nil || r.bodyBytes == nil || len(r.bodyBytes) != 0 || r.Headers == nil || r.Ctx.Len() != 0 {
		t.Errorf("UnmarshalRequest(earlier POST) = %+v", r)
	}
}

// TestUnmarshalPriority: an entry's priority decodes as written, an entry
// without one (written before priorities) at 0, and one outside the int32
// range, which no store keeps, is refused as undecodable.
func TestUnmarshalPriority(t *testing.T) {
	c := NewCollector()
	tests := []struct {
		entry string
		want  int
		err   error
	}{
		{`{"URL":"http://h/","Depth":1,"Priority":2147483647}`, math.MaxInt32, nil},
		{`{"URL":"http://h/","Depth":1,"Priority":-2147483648}`, math.MinInt32, nil},
		{`{"URL":"http://h/","Depth":1}`, 0, nil},
		{`{"URL":"http://h/","Method":"GET","Depth":1,"Body":null,"ID":3,"Ctx":{},"Headers":{},"Host":""}`, 0, nil},
		{`{"URL":"http://h/","Depth":1,"Priority":2147483648}`, 0, ErrPriorityRange},
		{`{"URL":"http://h/","Depth":1,"Priority":-2147483649}`, 0, ErrPriorityRange},
	}
	for _, tt := range tests {
		r, err := c.UnmarshalRequest([]byte(tt.entry))
		if tt.err != nil {
			if !errors.Is(err, tt.err) || !errors.Is(err, ErrUndecodableRequest) {
				t.Errorf("UnmarshalRequest(%s) error = %v, want ErrUndecodableRequest and %v", tt.entry, err, tt.err)
			}
			continue
		}
		if err != nil || r.Priority != tt.want {
			t.Errorf("UnmarshalRequest(%s) = Priority %v, %v; want %d", tt.entry, r, err, tt.want)
		}
	}
}

// TestMarshalRoundTripOddStrings checks that an entry whose strings hold
// quotes, control characters, U+2028 and non-ASCII decodes to the request
// it was made from (non-string Context values are dropped).
func TestMarshalRoundTripOddStrings(t *testing.T) {
	odd := "a\"b\\c\n\r\t\x00\x1f\x7f<>&é\u2028\u2029 end"
	ctx := NewContext()
	ctx.Put("k", odd)
	ctx.Put(odd, "v")
	ctx.Put("n", 42) // not a string: dropped
	h := http.Header{"X-Odd": {odd, ""}, "X-Empty": {}}
	r := &Request{
		URL: mustParse(t, "http://h/p%20q?x=%C3%A9&y=<z>"), Method: "PUT", Depth: -3, Ctx: ctx, Headers: &h,
		Host: odd, ResponseCharacterEncoding: "iso-8859-1", bodyBytes: []byte("\x00\xffbin"), Priority: math.MinInt32,
	}
	r.sitemap, r.sitemapLevel, r.sitemapFor = true, 2, odd
	r.parentURL = odd
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewCollector().UnmarshalRequest(b)
	if err != nil {
		t.Fatalf("UnmarshalRequest(%q) = %v", b, err)
	}
	if got.URL.String() != r.URL.String() || got.Method != "PUT" || got.Depth != -3 || got.Host != odd ||
		got.ResponseCharacterEncoding != "iso-8859-1" || string(got.bodyBytes) != "\x00\xffbin" ||
		got.Ctx.Get("k") != odd || got.Ctx.Get(odd) != "v" || got.Ctx.GetAny("n") != nil ||
		!reflect.DeepEqual(*got.Headers, h) || got.parentURL != odd || !got.sitemap || got.sitemapLevel != 2 || got.sitemapFor != odd ||
		got.Priority != math.MinInt32 {
		t.Errorf("round trip of %q gave %+v", b, got)
	}
}

// BenchmarkRequestEntry measures a queue entry's round trip for a link as
// a queue run stores it: Marshal when pushed, UnmarshalRequest when leased.
func BenchmarkRequestEntry(b *testing.B) {
	c := NewCollector()
	u, err := url.Parse("http://127.0.0.1:8080/p/123456?q=1&r=2")
	if err != nil {
		b.Fatal(err)
	}
	r := &Request{URL: u, Method: http.MethodGet, Depth: 2, Headers: &http.Header{}, Ctx: NewContext()}
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			data, err := r.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			n = len(data)
		}
		b.ReportMetric(float64(n), "bytes/entry")
	})
	data, err := r.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.UnmarshalRequest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
