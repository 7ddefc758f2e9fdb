package warc_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nlnwa/gowarc/v3"
)

// site is a test server with a page of each kind an archive must keep; it
// counts the requests it answered, by path.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

const samePage = `<html><head><title>Same</title></head><body>identical body</body></html>`

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{hits: make(map[string]int)}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Home</title></head><body>
<a href="/a">a</a> <a href="/b">b</a> <a href="/moved">moved</a> <a href="/missing">missing</a>
<a href="/gz">gz</a> <a href="/chunked">chunked</a> <a href="/big">big</a> <a href="/nm">nm</a></body></html>`)
	})
	same := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", fmt.Sprint(len(samePage)))
		fmt.Fprint(w, samePage)
	}
	mux.HandleFunc("/a", same)
	mux.HandleFunc("/b", same)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Target</title></head></html>`)
	})
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `<html><head><title>Zipped</title></head></html>`)
		_ = zw.Close()
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for i := range 3 {
			fmt.Fprintf(w, "<p>chunk %d</p>", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(bigSize))
		_, _ = io.Copy(w, io.LimitReader(zeros{}, bigSize))
	})
	mux.HandleFunc("/nm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// bigSize is more than the crawl's MaxBodySize (bodyLimit).
const (
	bigSize   = 3 << 20
	bodyLimit = 1 << 20
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

func (s *site) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

// record is what the tests check of a WARC record.
type record struct {
	typ, uri, id, concurrentTo, profile, refersTo, truncated, payloadDigest, ip string
	refersToURI, refersToDate, date                                             string
	block                                                                       []byte
	file                                                                        string
}

// readAll reads every record of the closed WARC files in dir with gowarc's
// reader, validating digests and lengths.
func readAll(t *testing.T, dir string) []record {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WARC files in %s (%v)", dir, err)
	}
	var out []record
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0, gowarc.WithSyntaxErrorPolicy(gowarc.ErrFail))
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: record at %d: %v", filepath.Base(f), rec.Offset, err)
			}
			wr := rec.WarcRecord
			h := wr.WarcHeader()
			raw, err := wr.Block().RawBytes()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sha1Base32(b), h.Get(gowarc.WarcBlockDigest); got != want {
				t.Errorf("%s: %s record of %s: block digest %s, computed %s", filepath.Base(f), wr.Type(), h.Get(gowarc.WarcTargetURI), want, got)
			}
			if head, payload, ok := bytes.Cut(b, []byte("\r\n\r\n")); ok && wr.Type() != gowarc.Revisit && h.Has(gowarc.WarcPayloadDigest) {
				if chunked(head) {
					// The payload is the entity body, chunked framing off.
					if payload, err = io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(payload))); err != nil {
						t.Errorf("%s: %s record of %s: chunked body: %v", filepath.Base(f), wr.Type(), h.Get(gowarc.WarcTargetURI), err)
					}
				}
				if got, want := sha1Base32(payload), h.Get(gowarc.WarcPayloadDigest); got != want {
					t.Errorf("%s: %s record of %s: payload digest %s, computed %s", filepath.Base(f), wr.Type(), h.Get(gowarc.WarcTargetURI), want, got)
				}
			}
			out = append(out, record{
				typ: wr.Type().String(), uri: h.Get(gowarc.WarcTargetURI), id: wr.RecordId(),
				concurrentTo: h.GetId(gowarc.WarcConcurrentTo), profile: h.Get(gowarc.WarcProfile),
				refersTo: h.GetId(gowarc.WarcRefersTo), truncated: h.Get(gowarc.WarcTruncated),
				payloadDigest: h.Get(gowarc.WarcPayloadDigest), ip: h.Get(gowarc.WarcIPAddress),
				refersToURI: h.Get(gowarc.WarcRefersToTargetURI), refersToDate: h.Get(gowarc.WarcRefersToDate),
				date:  h.Get(gowarc.WarcDate),
				block: b, file: filepath.Base(f),
			})
			_ = rec.Close()
		}
		_ = r.Close()
	}
	return out
}

// chunked reports whether an HTTP message head says its body is chunked.
func chunked(head []byte) bool {
	for line := range strings.SplitSeq(string(head), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(name, "Transfer-Encoding") && strings.Contains(strings.ToLower(value), "chunked") {
			return true
		}
	}
	return false
}

func sha1Base32(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

func byURI(recs []record, typ, suffix string) []record {
	var out []record
	for _, r := range recs {
		if r.typ == typ && strings.HasSuffix(r.uri, suffix) {
			out = append(out, r)
		}
	}
	return out
}
