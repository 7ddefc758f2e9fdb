package magpie

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

// acceptEncoding is sent on every request unless the caller set its own, so
// that servers may compress with anything readBody understands. Setting it
// ourselves also stops net/http from decompressing gzip behind our back, so
// the Content-Encoding header readBody sees is always the one the server sent.
const acceptEncoding = "gzip, deflate, br, zstd"

// ErrUnsupportedEncoding is returned by the body reader when a response's
// Content-Encoding names a coding magpie cannot undo (for example "compress").
var ErrUnsupportedEncoding = errors.New("magpie: unsupported Content-Encoding")

// ErrTooManyEncodings is returned when a response stacks more than
// MaxContentCodings Content-Encoding layers.
var ErrTooManyEncodings = errors.New("magpie: too many Content-Encoding layers")

// ErrUnsupportedCharset is returned when Request.ResponseCharacterEncoding
// names a charset that is not known to the WHATWG encoding index.
var ErrUnsupportedCharset = errors.New("magpie: unsupported charset")

// zstdMaxWindow caps the memory one zstd stream may make the decoder hold
// (its window). Real servers use windows of a few MiB; a hostile frame that
// declares a bigger one is refused instead of allocated.
const zstdMaxWindow = 64 << 20

// defaultReadSize is the first buffer size when the decoded length is unknown.
const defaultReadSize = 16 << 10

// maxPresize bounds the buffer allocated before any byte arrived: the
// Content-Length is the server's word, and a lying one (huge header, tiny
// body) must not cost more than this per response. Larger bodies grow the
// buffer as they arrive.
const maxPresize = 256 << 10

// MaxContentCodings is the most Content-Encoding layers a response may
// stack ("gzip, gzip, ..."); each costs a decoder's state, so a response
// with more is refused with ErrTooManyEncodings before anything is decoded.
const MaxContentCodings = 4

var (
	gzipPool sync.Pool // *gzip.Reader
	// zstdPool holds decoders built with concurrency 1, which decode
	// synchronously and start no goroutines, so a pooled decoder that the
	// GC drops leaks nothing.
	zstdPool sync.Pool // *zstd.Decoder
)

// readBody reads a response body as sent, undoes its Content-Encoding (gzip,
// deflate, br, zstd; gzip also when sniffed by magic bytes as Colly does for
// *.xml.gz and gzip content types), and stops after max bytes of decoded output
// (max <= 0: no limit). truncated reports that more decoded bytes were
// available than max. The caller closes r.
//
// A Content-Encoding list ("gzip, br") is undone right to left. An unknown
// coding gives an error wrapping ErrUnsupportedEncoding before anything is
// read; corrupt compressed data gives an error wrapping the decoder's, with
// body holding what was decoded before it.
func readBody(r io.Reader, header http.Header, urlPath string, max int64) (body []byte, truncated bool, err error) {
	return readBodyInto(r, header, urlPath, max, nil)
}

// readBodyInto is readBody reading into *into when into is not nil (a
// ReuseBody buffer, left holding the grown buffer): the body is then a
// part of it, not a copy.
func readBodyInto(r io.Reader, header http.Header, urlPath string, max int64, into *[]byte) (body []byte, truncated bool, err error) {
	codings, err := contentCodings(header)
	if err != nil {
		return nil, false, err
	}
	if len(codings) > MaxContentCodings {
		return nil, false, fmt.Errorf("%w: %d layers, at most %d", ErrTooManyEncodings, len(codings), MaxContentCodings)
	}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	src := r
	if len(codings) > 0 {
		// An encoded but empty body (HEAD, 204, 304) is not an error.
		br := bufio.NewReader(r)
		if _, err := br.Peek(1); err == io.EOF {
			return []byte{}, false, nil
		}
		src = br
	}
	for i := len(codings) - 1; i >= 0; i-- {
		dec, release, err := newDecoder(codings[i], src)
		if err != nil {
			return nil, false, fmt.Errorf("magpie: %s body: %w", codings[i], err)
		}
		closers = append(closers, release)
		src = dec
		if max > 0 {
			// Every layer's output is bounded by the body limit, not only
			// the last one's.
			src = io.LimitReader(src, max+1)
		}
	}
	if len(codings) == 0 && sniffGzip(header, urlPath) {
		br := bufio.NewReader(src)
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			dec, release, err := newDecoder("gzip", br)
			if err != nil {
				return nil, false, fmt.Errorf("magpie: gzip body: %w", err)
			}
			closers = append(closers, release)
			codings = []string{"gzip"}
			src = dec
		} else {
			src = br
		}
	}

	size := int64(defaultReadSize)
	if cl, perr := strconv.ParseInt(header.Get("Content-Length"), 10, 64); perr == nil && cl >= 0 {
		// Content-Length counts encoded bytes: exact for identity, a floor
		// for compressed bodies (HTML typically shrinks 4-8x).
		size = cl
		if len(codings) > 0 {
			size = min(cl, 16<<20) * 4
		}
	}
	switch {
	case into != nil:
		body, truncated, err = readReused(src, size, max, into)
	case exactLength(header, codings):
		body, truncated, err = readLimited(src, size, max)
	default:
		body, truncated, err = readScratch(src, max)
	}
	if err != nil && len(codings) > 0 {
		err = fmt.Errorf("magpie: decoding %s body: %w", strings.Join(codings, ", "), err)
	}
	return body, truncated, err
}

// readLimited reads r to EOF or until max+1 bytes (max <= 0: unbounded),
// starting with a buffer of size bytes. The extra byte over size lets a body
// of exactly Content-Length bytes see EOF without growing the buffer.
func readLimited(r io.Reader, size, max int64) ([]byte, bool, error) {
	if max > 0 {
		size = min(size, max)
	}
	// Content-Length is the server's word: trust it for up to maxPresize
	// bytes and let larger bodies grow as they arrive.
	size = min(size, maxPresize)
	body, truncated, err := readInto(newBodyBuffer(int(size)+1), r, max)
	return finishBody(body), truncated, err
}

// readInto is readLimited into buf, which it grows as needed.
func readInto(buf []byte, r io.Reader, max int64) ([]byte, bool, error) {
	limit := int64(-1)
	if max > 0 {
		limit = max + 1
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := cap(buf)
		if limit >= 0 && int64(end) > limit {
			end = int(limit)
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if limit >= 0 && int64(len(buf)) >= limit {
			return buf[:max], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// contentCodings returns the codings of every Content-Encoding header line,
// in the order they were applied, without "identity".
func contentCodings(header http.Header) ([]string, error) {
	var out []string
	for _, line := range header.Values("Content-Encoding") {
		for part := range strings.SplitSeq(line, ",") {
			c := strings.ToLower(strings.TrimSpace(part))
			switch c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate", "br", "zstd":
				if c == "x-gzip" {
					c = "gzip"
				}
				out = append(out, c)
			default:
				return nil, fmt.Errorf("%w: %q", ErrUnsupportedEncoding, c)
			}
		}
	}
	return out, nil
}

// sniffGzip reports whether a body without Content-Encoding may still be
// gzip: Colly gunzips such bodies when the type or the path says gzip.
func sniffGzip(header http.Header, urlPath string) bool {
	return strings.Contains(strings.ToLower(header.Get("Content-Type")), "gzip") ||
		strings.HasSuffix(strings.ToLower(urlPath), ".xml.gz")
}

// newDecoder wraps r in a decoder for coding; release returns pooled state.
func newDecoder(coding string, r io.Reader) (io.Reader, func(), error) {
	switch coding {
	case "gzip":
		if zr, ok := gzipPool.Get().(*gzip.Reader); ok {
			if err := zr.Reset(r); err != nil {
				gzipPool.Put(zr)
				return nil, nil, err
			}
			return zr, func() { gzipPool.Put(zr) }, nil
		}
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { gzipPool.Put(zr) }, nil
	case "deflate":
		// RFC 9110 says zlib, but many servers send raw deflate; a zlib
		// stream starts with a CMF/FLG pair whose 16-bit value is a
		// multiple of 31 and whose method nibble is 8.
		br := bufio.NewReader(r)
		if h, _ := br.Peek(2); len(h) == 2 && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, nil, err
			}
			return zr, func() { zr.Close() }, nil
		}
		fr := flate.NewReader(br)
		return fr, func() { fr.Close() }, nil
	case "br":
		return brotli.NewReader(r), func() {}, nil
	case "zstd":
		d, ok := zstdPool.Get().(*zstd.Decoder)
		if !ok {
			var err error
			d, err = zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(zstdMaxWindow),
				zstd.WithDecoderMaxWindow(zstdMaxWindow))
			if err != nil {
				return nil, nil, err
			}
		}
		if err := d.Reset(r); err != nil {
			d.Close()
			return nil, nil, err
		}
		return d, func() {
			// Reset(nil) drops the reference to the response body.
			if d.Reset(nil) == nil {
				zstdPool.Put(d)
			} else {
				d.Close()
			}
		}, nil
	}
	return nil, nil, fmt.Errorf("%w: %q", ErrUnsupportedEncoding, coding)
}

// toUTF8 converts a text body to UTF-8. The source charset is, in order:
// forced (Request.ResponseCharacterEncoding), the Content-Type header's
// charset, a byte-order mark, <meta charset> or <meta http-equiv> in the first
// 1024 bytes of HTML, and, only when detect is true, a guess from the content.
// Bodies that are not text (image, audio, video, font) are returned unchanged.
//
// A UTF-8 body is returned as is (no copy; a UTF-8 BOM is sliced off). An
// unknown forced charset gives an error wrapping ErrUnsupportedCharset; an
// unknown charset from the server is ignored and the next source is tried,
// since servers send labels like "none".
func toUTF8(body []byte, contentType string, forced string, detect bool) ([]byte, error) {
	mediaType, declared, simple := simpleContentType(contentType)
	var params map[string]string
	if !simple {
		mediaType, params, _ = mime.ParseMediaType(contentType)
		if mediaType == "" {
			mediaType = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
		}
		declared = params["charset"]
	}
	if isBinaryType(mediaType) || sniffsBinary(body) {
		return body, nil
	}
	if forced == "" && isUTF8Label(declared) {
		return validUTF8(bytes.TrimPrefix(body, []byte{0xef, 0xbb, 0xbf})), nil
	}
	if forced != "" {
		enc, name := charset.Lookup(forced)
		if enc == nil {
			return body, fmt.Errorf("%w: %q", ErrUnsupportedCharset, forced)
		}
		return decodeWith(body, name)
	}
	if cs := declared; cs != "" {
		if enc, name := charset.Lookup(cs); enc != nil {
			return decodeWith(body, name)
		}
	}
	switch {
	case bytes.HasPrefix(body, []byte{0xef, 0xbb, 0xbf}):
		return validUTF8(body[3:]), nil
	case bytes.HasPrefix(body, []byte{0xfe, 0xff}):
		return decodeWith(body, "utf-16be")
	case bytes.HasPrefix(body, []byte{0xff, 0xfe}):
		return decodeWith(body, "utf-16le")
	}
	if isHTMLType(mediaType, body) {
		if name := metaCharset(body); name != "" {
			return decodeWith(body, name)
		}
	}
	if detect {
		_, name, _ := charset.DetermineEncoding(body, "")
		return decodeWith(body, name)
	}
	return body, nil
}

// simpleContentType reads a Content-Type of the common forms "type/subtype"
// and "type/subtype; charset=label" (tokens only, no quotes, no other
// parameter) without mime.ParseMediaType's map and copies: the media type,
// lower-cased, and the charset label as written. ok is false for any other
// form, which ParseMediaType then reads; for the forms accepted both give
// the same media type and charset.
func simpleContentType(v string) (mediaType, charsetLabel string, ok bool) {
	typ, param, hasParam := strings.Cut(v, ";")
	typ = strings.TrimSpace(typ)
	major, minor, slash := strings.Cut(typ, "/")
	if !slash || !isToken(major) || !isToken(minor) {
		return "", "", false
	}
	if hasParam {
		param = strings.TrimSpace(param)
		name, value, eq := strings.Cut(param, "=")
		if !eq || !strings.EqualFold(name, "charset") || !isToken(value) {
			return "", "", false
		}
		charsetLabel = value
	}
	return strings.ToLower(typ), charsetLabel, true
}

// isToken reports whether s is a non-empty RFC 9110 token, as
// mime.ParseMediaType accepts for a type, subtype or parameter value.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// isUTF8Label reports whether label is one of the usual spellings of UTF-8
// (the WHATWG labels "utf-8" and "utf8", any case), which are taken without
// a charset.Lookup.
func isUTF8Label(label string) bool {
	return strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8")
}

// decodeWith converts body from the WHATWG encoding called name.
func decodeWith(body []byte, name string) ([]byte, error) {
	if name == "utf-8" {
		return validUTF8(bytes.TrimPrefix(body, []byte{0xef, 0xbb, 0xbf})), nil
	}
	enc, _ := charset.Lookup(name)
	if enc == nil {
		return body, fmt.Errorf("%w: %q", ErrUnsupportedCharset, name)
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return body, fmt.Errorf("magpie: decoding %s body: %w", name, err)
	}
	// The UTF-16 decoders keep a byte-order mark as U+FEFF.
	return bytes.TrimPrefix(out, []byte("\ufeff")), nil
}

// validUTF8 replaces each byte that does not start a valid UTF-8 sequence
// with U+FFFD, as a browser's UTF-8 decoder does, so that callbacks never see
// invalid strings. Valid input is returned as is, without a copy.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
			b = b[1:]
			continue
		}
		out = append(out, b[:size]...)
		b = b[size:]
	}
	return out
}

// isBinaryType reports media types whose bodies are never text.
func isBinaryType(mediaType string) bool {
	for _, p := range []string{"image/", "audio/", "video/", "font/"} {
		if strings.HasPrefix(mediaType, p) {
			return true
		}
	}
	switch mediaType {
	case "application/octet-stream", "application/pdf", "application/zip",
		"application/gzip", "application/x-gzip", "application/wasm",
		"application/x-protobuf", "application/protobuf":
		return true
	}
	return false
}

// sniffsBinary reports whether body starts with the signature of an image,
// audio, video, font or archive format (http.DetectContentType), whatever
// the server's Content-Type says: transcoding such bytes would only destroy
// them. Unknown binary data ("application/octet-stream") is not counted, as
// a UTF-16 text without a byte-order mark sniffs as that too.
func sniffsBinary(body []byte) bool {
	if len(body) == 0 {
		return false
	}
	mt, _, _ := strings.Cut(http.DetectContentType(body), ";")
	return mt != "application/octet-stream" && isBinaryType(mt)
}

// isHTMLType reports whether a <meta> prescan applies: the type says HTML, or
// there is no type and the content sniffs as HTML.
func isHTMLType(mediaType string, body []byte) bool {
	switch mediaType {
	case "text/html", "application/xhtml+xml":
		return true
	case "":
		return strings.HasPrefix(http.DetectContentType(body), "text/html")
	}
	return false
}

// metaCharset returns the WHATWG name of the charset declared by a <meta>
// element in the first 1024 bytes of body, or "". As the HTML standard
// requires, a declared UTF-16 means UTF-8 (the bytes parsed as ASCII).
func metaCharset(body []byte) string {
	z := html.NewTokenizer(bytes.NewReader(body[:min(len(body), 1024)]))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "meta" || !hasAttr {
				continue
			}
			var cs, content string
			var httpEquiv bool
			for {
				k, v, more := z.TagAttr()
				switch string(k) {
				case "charset":
					cs = string(v)
				case "http-equiv":
					httpEquiv = strings.EqualFold(string(v), "content-type")
				case "content":
					content = string(v)
				}
				if !more {
					break
				}
			}
			if cs == "" && httpEquiv {
				cs = charsetFromContent(content)
			}
			if cs == "" {
				continue
			}
			if _, n := charset.Lookup(cs); n != "" {
				if strings.HasPrefix(n, "utf-16") {
					return "utf-8"
				}
				return n
			}
		}
	}
}

// charsetFromContent extracts the charset from a <meta content> value such as
// "text/html; charset=windows-1251", following the HTML standard's algorithm
// loosely: the first "charset", optional spaces, "=", then a quoted or bare
// value.
func charsetFromContent(s string) string {
	lower := asciiLower(s)
	for {
		i := strings.Index(lower, "charset")
		if i < 0 {
			return ""
		}
		lower, s = lower[i+len("charset"):], s[i+len("charset"):]
		rest := strings.TrimLeft(s, " \t\n\f\r")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t\n\f\r")
		if rest == "" {
			return ""
		}
		if q := rest[0]; q == '"' || q == '\'' {
			if j := strings.IndexByte(rest[1:], q); j >= 0 {
				return rest[1 : 1+j]
			}
			return ""
		}
		end := strings.IndexFunc(rest, func(r rune) bool {
			return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
		})
		if end < 0 {
			return rest
		}
		return rest[:end]
	}
}

// asciiLower lowercases ASCII letters only, so byte offsets stay valid.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
