package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// testServer is an httptest server on 127.0.0.1 that counts hits per path.
type testServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	// reqs keeps each request's headers by path (last one wins).
	reqs map[string]http.Header
}

func (ts *testServer) count(path string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.hits[path]
}

func (ts *testServer) total() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for p, v := range ts.hits {
		if p != "/robots.txt" {
			n += v
		}
	}
	return n
}

func (ts *testServer) header(path string) http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.reqs[path]
}

// newTestServer serves a small site:
//
//	/            links to /a, /b, /c
//	/a, /b, /c   each link to /leaf?from=X and back to /
//	/leaf        a leaf page
//	/html        <p class="x">one</p><p class="x">two</p>
//	/base        <base href="/sub/"> and a relative link
//	/404, /500   errors
//	/redirect    302 to /html
//	/big         200 KiB of text
//	/xml         an XML document
//	/post        echoes the form
//	/robots.txt  disallows /secret (and /go-secret redirects there)
//	/setcookie, /getcookie
func newTestServer(t testing.TB) *testServer {
	t.Helper()
	ts := &testServer{hits: map[string]int{}, reqs: map[string]http.Header{}}
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>t</title></head><body>%s</body></html>", body)
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>`)
	})
	for _, p := range []string{"a", "b", "c"} {
		mux.HandleFunc("/"+p, func(w http.ResponseWriter, r *http.Request) {
			page(w, fmt.Sprintf(`<a href="/leaf?from=%s">leaf</a><a href="/">home</a>`, p))
		})
	}
	mux.HandleFunc("/leaf", func(w http.ResponseWriter, r *http.Request) { page(w, "leaf "+r.URL.Query().Get("from")) })
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p class="x">one</p><p class="x">two</p><div id="d"><span>s</span></div>`)
	})
	mux.HandleFunc("/base", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><base href="/sub/"></head><body><a href="page">p</a></body></html>`)
	})
	mux.HandleFunc("/404", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusNotFound) })
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/html", http.StatusFound) })
	mux.HandleFunc("/go-secret", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/secret", http.StatusFound) })
	mux.HandleFunc("/secret", func(w http.ResponseWriter, r *http.Request) { page(w, "secret") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 200<<10))
	})
	mux.HandleFunc("/xml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0"?><root><item>1</item><item>2</item></root>`)
	})
	mux.HandleFunc("/post", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseMultipartForm(1 << 20)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s name=%s", r.Method, r.FormValue("name"))
	})
	mux.HandleFunc("/setcookie", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
		page(w, "set")
	})
	mux.HandleFunc("/getcookie", func(w http.ResponseWriter, r *http.Request) {
		ck, _ := r.Cookie("session")
		w.Header().Set("Content-Type", "text/plain")
		if ck != nil {
			fmt.Fprint(w, ck.Value)
		}
	})
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "User-agent: *\nDisallow: /secret\n\nUser-agent: BadBot\nDisallow: /\n")
	})
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.hits[r.URL.Path]++
		ts.reqs[r.URL.Path] = r.Header.Clone()
		ts.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}
