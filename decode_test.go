package magpie

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/html/charset"
)

func gzipBytes(t testing.TB, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zlibBytes(t testing.TB, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func flateBytes(t testing.TB, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.DefaultCompression)
	w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func brBytes(t testing.TB, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := brotli.NewWriter(&b)
	w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstdBytes(t testing.TB, p []byte) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(p, nil)
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestDecodeReadBodyDecode(t *testing.T) {
	plain := []byte(strings.Repeat("<p>hello, magpie</p>\n", 200))
	tests := []struct {
		name   string
		body   []byte
		header http.Header
		path   string
	}{
		{"identity", plain, hdr(), "/"},
		{"identity-explicit", plain, hdr("Content-Encoding", "identity"), "/"},
		{"gzip", gzipBytes(t, plain), hdr("Content-Encoding", "gzip"), "/"},
		{"x-gzip", gzipBytes(t, plain), hdr("Content-Encoding", "X-GZIP"), "/"},
		{"deflate-zlib", zlibBytes(t, plain), hdr("Content-Encoding", "deflate"), "/"},
		{"deflate-raw", flateBytes(t, plain), hdr("Content-Encoding", "deflate"), "/"},
		{"br", brBytes(t, plain), hdr("Content-Encoding", "br"), "/"},
		{"zstd", zstdBytes(t, plain), hdr("Content-Encoding", "zstd"), "/"},
		{"list gzip,br", brBytes(t, gzipBytes(t, plain)), hdr("Content-Encoding", "gzip, br"), "/"},
		{"two header lines", zstdBytes(t, zlibBytes(t, plain)), hdr("Content-Encoding", "deflate", "Content-Encoding", "identity, zstd"), "/"},
		{"sniff xml.gz", gzipBytes(t, plain), hdr(), "/sitemap.XML.gz"},
		{"sniff content-type", gzipBytes(t, plain), hdr("Content-Type", "application/x-gzip"), "/x"},
		{"sniff no magic", plain, hdr("Content-Type", "application/gzip"), "/x.xml.gz"},
		{"content-length exact", plain, hdr("Content-Length", strconv.Itoa(len(plain))), "/"},
		{"content-length lies", plain, hdr("Content-Length", "3"), "/"},
		{"content-length huge", gzipBytes(t, plain), hdr("Content-Encoding", "gzip", "Content-Length", "9223372036854775807"), "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated, err := readBody(bytes.NewReader(tt.body), tt.header, tt.path, 0)
			if err != nil {
				t.Fatalf("readBody() error = %v, want nil", err)
			}
			if truncated {
				t.Errorf("readBody() truncated = true, want false")
			}
			if !bytes.Equal(got, plain) {
				t.Errorf("readBody() = %d bytes %.40q, want %d bytes %.40q", len(got), got, len(plain), plain)
			}
		})
	}
}

func TestDecodeReadBodyMaxAppliesToDecodedBytes(t *testing.T) {
	// A 64 MiB run of zeros compresses to a few KiB: a zip bomb in miniature.
	bomb := make([]byte, 64<<20)
	for _, enc := range []struct {
		name string
		body []byte
	}{
		{"gzip", gzipBytes(t, bomb)},
		{"br", brBytes(t, bomb)},
		{"zstd", zstdBytes(t, bomb)},
		{"deflate", zlibBytes(t, bomb)},
	} {
		t.Run(enc.name, func(t *testing.T) {
			const max = 1000
			got, truncated, err := readBody(bytes.NewReader(enc.body), hdr("Content-Encoding", enc.name), "/", max)
			if err != nil {
				t.Fatalf("readBody() error = %v", err)
			}
			if !truncated || len(got) != max {
				t.Errorf("readBody() = %d bytes, truncated %v; want %d bytes, truncated true", len(got), truncated, max)
			}
			if cap(got) > 2*max+defaultReadSize {
				t.Errorf("readBody() buffer cap = %d, want it bounded near max %d", cap(got), max)
			}
		})
	}
}

func TestDecodeReadBodyTruncation(t *testing.T) {
	plain := []byte("0123456789")
	tests := []struct {
		max           int64
		want          string
		wantTruncated bool
	}{
		{0, "0123456789", false},
		{-1, "0123456789", false},
		{10, "0123456789", false},
		{11, "0123456789", false},
		{9, "012345678", true},
		{1, "0", true},
	}
	for _, tt := range tests {
		for _, gz := range []bool{false, true} {
			t.Run(strconv.FormatInt(tt.max, 10)+"/gzip="+strconv.FormatBool(gz), func(t *testing.T) {
				body, h := plain, hdr("Content-Length", "10")
				if gz {
					body, h = gzipBytes(t, plain), hdr("Content-Encoding", "gzip")
				}
				got, truncated, err := readBody(bytes.NewReader(body), h, "/", tt.max)
				if err != nil || string(got) != tt.want || truncated != tt.wantTruncated {
					t.Errorf("readBody(max=%d) = %q, %v, %v; want %q, %v, nil", tt.max, got, truncated, err, tt.want, tt.wantTruncated)
				}
			})
		}
	}
}

func TestDecodeReadBodyErrors(t *testing.T) {
	plain := []byte(strings.Repeat("abc", 1000))
	gz := gzipBytes(t, plain)
	tests := []struct {
		name    string
		body    []byte
		header  http.Header
		wantIs  error
		wantMsg string
	}{
		{"unknown coding", plain, hdr("Content-Encoding", "compress"), ErrUnsupportedEncoding, "compress"},
		{"unknown in list", plain, hdr("Content-Encoding", "gzip, snappy"), ErrUnsupportedEncoding, "snappy"},
		{"not gzip", plain, hdr("Content-Encoding", "gzip"), gzip.ErrHeader, "gzip"},
		{"truncated gzip", gz[:len(gz)/2], hdr("Content-Encoding", "gzip"), io.ErrUnexpectedEOF, "gzip"},
		{"bad gzip checksum", append(append([]byte{}, gz[:len(gz)-8]...), 1, 2, 3, 4, 5, 6, 7, 8), hdr("Content-Encoding", "gzip"), gzip.ErrChecksum, "gzip"},
		{"not zstd", plain, hdr("Content-Encoding", "zstd"), nil, "zstd"},
		{"not brotli", plain, hdr("Content-Encoding", "br"), nil, "br"},
		{"not deflate", []byte{0xff, 0xff, 0xff, 0xff}, hdr("Content-Encoding", "deflate"), nil, "deflate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readBody(bytes.NewReader(tt.body), tt.header, "/", 0)
			if err == nil {
				t.Fatalf("readBody() error = nil, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("readBody() error = %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("readBody() error = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestDecodeReadBodyEmptyEncoded(t *testing.T) {
	for _, enc := range []string{"gzip", "br", "zstd", "deflate"} {
		got, truncated, err := readBody(http.NoBody, hdr("Content-Encoding", enc), "/", 100)
		if err != nil || len(got) != 0 || truncated {
			t.Errorf("readBody(empty %s) = %q, %v, %v; want empty, false, nil", enc, got, truncated, err)
		}
	}
}

// encodeAs encodes s in the WHATWG encoding name.
func encodeAs(t *testing.T, name, s string) []byte {
	t.Helper()
	enc, _ := charset.Lookup(name)
	if enc == nil {
		t.Fatalf("charset.Lookup(%q) = nil", name)
	}
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func utf16LEWithBOM(s string) []byte {
	out := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

func TestCharsetToUTF8(t *testing.T) {
	const ru = "Привет, мир! Съешь же ещё этих мягких французских булок"
	const ja = "こんにちは世界、日本語のページです"
	metaPage := `<html><head><meta charset="windows-1251"><title>t</title></head><body>` + ru + `</body></html>`
	equivPage := `<html><head><META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=windows-1251"></head><body>` + ru + `</body></html>`
	tests := []struct {
		name        string
		body        []byte
		contentType string
		forced      string
		detect      bool
		want        string
	}{
		{"meta charset only", encodeAs(t, "windows-1251", metaPage), "text/html", "", false, metaPage},
		{"http-equiv only", encodeAs(t, "windows-1251", equivPage), "text/html; charset=", "", false, equivPage},
		{"meta without content-type", encodeAs(t, "windows-1251", metaPage), "", "", false, metaPage},
		{"shift_jis in header", encodeAs(t, "shift_jis", ja), "text/html; charset=Shift_JIS", "", false, ja},
		{"utf-16 BOM", utf16LEWithBOM("<p>" + ja + "</p>"), "text/html", "", false, "<p>" + ja + "</p>"},
		{"utf-8 BOM stripped", append([]byte{0xef, 0xbb, 0xbf}, ja...), "text/html", "", false, ja},
		{"forced wins over header and meta", encodeAs(t, "koi8-r", ru), "text/html; charset=windows-1251", "KOI8-R", false, ru},
		{"header wins over meta", encodeAs(t, "koi8-r", `<meta charset="windows-1251">`+ru), "text/html; charset=koi8-r", "", false, `<meta charset="windows-1251">` + ru},
		{"unknown header charset falls through to meta", encodeAs(t, "windows-1251", metaPage), "text/html; charset=none", "", false, metaPage},
		{"no declaration, no detect: untouched", encodeAs(t, "windows-1251", ru), "text/html", "", false, string(encodeAs(t, "windows-1251", ru))},
		{"no declaration, detect guesses", encodeAs(t, "windows-1252", "café crème brûlée"), "text/plain", "", true, "café crème brûlée"},
		{"meta utf-16 means utf-8", []byte(`<meta charset="utf-16">` + ja), "text/html", "", false, `<meta charset="utf-16">` + ja},
		{"meta ignored for json", encodeAs(t, "windows-1251", metaPage), "application/json", "", false, string(encodeAs(t, "windows-1251", metaPage))},
		{"image untouched", []byte{0xff, 0xfe, 0x41, 0x00}, "image/png", "utf-16le", true, "\xff\xfeA\x00"},
		{"font untouched", []byte{0xc0, 0xc1}, "font/woff2; charset=windows-1251", "", true, "\xc0\xc1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toUTF8(tt.body, tt.contentType, tt.forced, tt.detect)
			if err != nil {
				t.Fatalf("toUTF8() error = %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("toUTF8() = %.60q, want %.60q", got, tt.want)
			}
		})
	}
}

func TestCharsetUTF8NotCopied(t *testing.T) {
	body := []byte("<p>plain utf-8 ü</p>")
	for _, ct := range []string{"text/html; charset=utf-8", "text/html", ""} {
		got, err := toUTF8(body, ct, "", true)
		if err != nil || len(got) == 0 || &got[0] != &body[0] {
			t.Errorf("toUTF8(utf-8, %q) copied the body or failed (err %v)", ct, err)
		}
	}
}

func TestCharsetForcedUnknown(t *testing.T) {
	_, err := toUTF8([]byte("x"), "text/html", "no-such-charset", false)
	if !errors.Is(err, ErrUnsupportedCharset) {
		t.Errorf("toUTF8(forced unknown) error = %v, want %v", err, ErrUnsupportedCharset)
	}
}

func TestCharsetMetaContent(t *testing.T) {
	tests := map[string]string{
		"text/html; charset=windows-1251":     "windows-1251",
		"text/html;charset = 'koi8-r'":        "koi8-r",
		`text/html; CHARSET="shift_jis"; x=y`: "shift_jis",
		"text/html; charsetx; charset=utf-8":  "utf-8",
		"text/html":                           "",
		"charset=":                            "",
		`charset="unterminated`:               "",
	}
	for in, want := range tests {
		if got := charsetFromContent(in); got != want {
			t.Errorf("charsetFromContent(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDecodeReadBody(f *testing.F) {
	plain := []byte("<html><body>fuzz</body></html>")
	f.Add(gzipBytes(f, plain), "gzip", "text/html", "/", int64(0))
	f.Add(zlibBytes(f, plain), "deflate", "", "/", int64(10))
	f.Add(flateBytes(f, plain), "deflate", "", "/", int64(10))
	f.Add(brBytes(f, plain), "br", "", "/", int64(5))
	f.Add(zstdBytes(f, plain), "zstd", "", "/", int64(0))
	f.Add(plain, "identity", "", "/a.xml.gz", int64(3))
	f.Add(gzipBytes(f, plain), "", "application/gzip", "/a.xml.gz", int64(3))
	// Stacked codings: within the cap, and beyond it.
	f.Add(gzipBytes(f, gzipBytes(f, plain)), "gzip, gzip", "text/html", "/", int64(0))
	f.Add(gzipBytes(f, brBytes(f, plain)), "br, gzip", "", "/", int64(8))
	f.Add(plain, strings.Repeat("gzip,", 50), "", "/", int64(0))
	f.Fuzz(func(t *testing.T, body []byte, enc, ct, path string, max int64) {
		h := hdr("Content-Encoding", enc, "Content-Type", ct)
		got, truncated, err := readBody(bytes.NewReader(body), h, path, max)
		if max > 0 && int64(len(got)) > max {
			t.Fatalf("readBody(max=%d) returned %d bytes", max, len(got))
		}
		if truncated && err != nil {
			t.Fatalf("readBody() truncated with error %v", err)
		}
		if codings, cerr := contentCodings(h); cerr == nil && len(codings) > MaxContentCodings && !errors.Is(err, ErrTooManyEncodings) {
			t.Fatalf("readBody() of %d codings error = %v, want ErrTooManyEncodings", len(codings), err)
		}
		// toUTF8 must not panic on whatever came out.
		toUTF8(got, ct, "", true)
	})
}

func benchmarkPage() []byte {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=utf-8><title>bench</title></head><body>\n")
	for i := 0; b.Len() < 16<<10; i++ {
		b.WriteString(`<div class="item"><a href="/page/` + strconv.Itoa(i) + `">Item ` + strconv.Itoa(i) + "</a> some text to read</div>\n")
	}
	b.WriteString("</body></html>")
	return []byte(b.String())
}

func BenchmarkReadBody(b *testing.B) {
	page := benchmarkPage()
	for _, bc := range []struct {
		name string
		body []byte
		h    http.Header
	}{
		{"identity", page, hdr("Content-Length", strconv.Itoa(len(page)))},
		{"identity-no-length", page, hdr()},
		{"gzip", gzipBytes(b, page), hdr("Content-Encoding", "gzip")},
		{"br", brBytes(b, page), hdr("Content-Encoding", "br")},
		{"zstd", zstdBytes(b, page), hdr("Content-Encoding", "zstd")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			r := bytes.NewReader(bc.body)
			for b.Loop() {
				r.Reset(bc.body)
				if _, _, err := readBody(r, bc.h, "/", 10<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestDecodeReadBodyNoGoroutineLeak(t *testing.T) {
	plain := []byte(strings.Repeat("zstd and friends ", 4096))
	bodies := map[string][]byte{"zstd": zstdBytes(t, plain), "br": brBytes(t, plain), "gzip": gzipBytes(t, plain)}
	before := runtime.NumGoroutine()
	for range 50 {
		for enc, b := range bodies {
			if _, _, err := readBody(bytes.NewReader(b), hdr("Content-Encoding", enc), "/", 100); err != nil {
				t.Fatalf("readBody(%s) error = %v", enc, err)
			}
			// A corrupt stream must not strand a decoder goroutine either.
			readBody(bytes.NewReader(b[:len(b)/2]), hdr("Content-Encoding", enc), "/", 0)
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines before %d, after 150 decodes %d: decoders leak goroutines", before, after)
	}
}

func TestDecodeReadBodyIdentityPresize(t *testing.T) {
	// A lying Content-Length must not make readBody allocate it up front.
	got, truncated, err := readBody(strings.NewReader("short"), hdr("Content-Length", "1099511627776"), "/", 0)
	if err != nil || string(got) != "short" || truncated {
		t.Fatalf("readBody() = %q, %v, %v; want \"short\", false, nil", got, truncated, err)
	}
	if cap(got) > maxPresize+1 {
		t.Errorf("readBody() allocated %d bytes for a 5-byte body", cap(got))
	}
	got, truncated, _ = readBody(strings.NewReader("0123456789"), hdr("Content-Length", "1099511627776"), "/", 4)
	if string(got) != "0123" || !truncated || cap(got) > 5 {
		t.Errorf("readBody(max 4) = %q (cap %d), %v; want \"0123\" (cap <= 5), true", got, cap(got), truncated)
	}
}
