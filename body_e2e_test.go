package magpie

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/text/encoding/charmap"
)

// TestBodyReachesCallbacksDecoded crawls pages that are compressed with
// every supported Content-Encoding, or encoded in windows-1251 declared only
// in <meta>, and checks that OnHTML sees the right UTF-8 text (Colly leaves
// the Cyrillic page as mojibake and cannot read br or zstd).
func TestBodyReachesCallbacksDecoded(t *testing.T) {
	const title = "Привет, сорока"
	page := []byte("<html><head><title>" + title + "</title></head><body>ok</body></html>")
	cp1251, err := charmap.Windows1251.NewEncoder().Bytes([]byte(
		`<html><head><meta charset="windows-1251"><title>` + title + `</title></head><body>ok</body></html>`))
	if err != nil {
		t.Fatal(err)
	}
	compress := map[string]func([]byte) []byte{
		"gzip": func(b []byte) []byte {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(b)
			w.Close()
			return buf.Bytes()
		},
		"deflate": func(b []byte) []byte {
			var buf bytes.Buffer
			w := zlib.NewWriter(&buf)
			w.Write(b)
			w.Close()
			return buf.Bytes()
		},
		"br": func(b []byte) []byte {
			var buf bytes.Buffer
			w := brotli.NewWriter(&buf)
			w.Write(b)
			w.Close()
			return buf.Bytes()
		},
		"zstd": func(b []byte) []byte {
			enc, err := zstd.NewWriter(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			return enc.EncodeAll(b, nil)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cp1251" {
			w.Header().Set("Content-Type", "text/html") // no charset: only <meta> says it
			w.Write(cp1251)
			return
		}
		enc := r.URL.Path[1:]
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Encoding", enc)
		w.Write(compress[enc](page))
	}))
	defer srv.Close()

	for _, path := range []string{"/cp1251", "/gzip", "/deflate", "/br", "/zstd"} {
		t.Run(path[1:], func(t *testing.T) {
			c := NewCollector(IgnoreRobotsTxt())
			var got string
			c.OnHTML("title", func(e *HTMLElement) { got = e.Text })
			if err := c.Visit(srv.URL + path); err != nil {
				t.Fatalf("Visit(%s) error = %v, want nil", path, err)
			}
			if got != title {
				t.Errorf("OnHTML title for %s = %q, want %q", path, got, title)
			}
		})
	}
}
