package magpie

import (
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Response is the answer to a Request, as callbacks see it.
type Response struct {
	// itemMu guards items, the values Emit collected.
	itemMu sync.Mutex
	items  []any

	// StatusCode is the HTTP status.
	StatusCode int
	// Body is the decompressed body, converted to UTF-8 for text content
	// (a body whose bytes are an image, audio, video, font or archive is
	// left as it is, whatever its Content-Type says). RawBody and Save
	// give the bytes as received.
	Body []byte
	// Ctx is the request's Context.
	Ctx *Context
	// Request is the request this responds to. It is set even for errors
	// found before any fetch (forbidden domain, robots.txt, depth, revisit),
	// so OnError always knows which request failed.
	Request *Request
	// Headers are the response headers.
	Headers *http.Header
	// Trace holds connection timings when TraceHTTP is on.
	Trace *HTTPTrace
	// Truncated is true when the body was cut at MaxBodySize (Colly truncates silently).
	Truncated bool
	// Flattened is true when the HTML was nested deeper than the parser
	// allows (512 open elements) and was parsed again with the elements
	// past that depth left out of the nesting (their content kept), as a
	// browser still renders such pages. Set before OnHTML runs.
	Flattened bool
	// Redirects lists the URLs that redirected to the final one, in order;
	// empty when there was no redirect.
	Redirects []*url.URL
	// FromCache is true when the response came from CacheDir.
	FromCache bool
	// Change is what recrawl mode (Recrawl) found: new, changed, unchanged
	// (a 304 answer has StatusCode 304 and an empty Body) or gone (in
	// OnError, with the 404 or 410, for a page that answered 2xx before).
	// ChangeNone without Recrawl, and for a URL that never answered 2xx.
	Change Change

	// raw is the decompressed body as received, kept when the charset
	// conversion made Body a different slice; decoded is that slice, so that
	// Save can tell whether a callback replaced Body since.
	raw, decoded []byte

	// reused is the ReuseBody buffer the body was read into (Body, or raw
	// when the charset conversion made Body a copy), until releaseBody.
	reused *[]byte

	// err is the failure the analyzer delivers to OnError.
	err error
	// aborted is set when OnRequest aborted the request: it finishes silently.
	aborted bool
	// retryAfter is the server's Retry-After, for the retry policy.
	retryAfter time.Duration
}

// Save writes the body to fileName with mode 0644: the bytes as received
// (decompressed, not converted to UTF-8), unless a callback has replaced
// Body, whose content is then written.
func (r *Response) Save(fileName string) error {
	return os.WriteFile(fileName, r.saved(), 0o644)
}

// RawBody is the body as received, decompressed but not converted to UTF-8:
// Body itself when no conversion changed it. Callbacks must not modify it.
func (r *Response) RawBody() []byte {
	if r.raw != nil {
		return r.raw
	}
	return r.Body
}

// saved is what Save writes.
func (r *Response) saved() []byte {
	if r.raw != nil && sameBytes(r.Body, r.decoded) {
		return r.raw
	}
	return r.Body
}

// sameBytes reports whether a and b are the same slice (not equal content).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// setDecoded records that body, a conversion of Body, replaces it.
func (r *Response) setDecoded(body []byte) {
	if !sameBytes(body, r.Body) || cap(body) != cap(r.Body) {
		r.raw, r.decoded = r.Body, body
	}
	r.Body = body
}

// releaseBody hands the ReuseBody buffer back once nothing the collector
// runs reads this response's body any more. Body and RawBody become nil, so
// that a Response kept past its callbacks shows no body rather than a later
// page's.
func (r *Response) releaseBody() {
	bp := r.reused
	if bp == nil {
		return
	}
	r.reused = nil
	r.Body, r.raw, r.decoded = nil, nil, nil
	putBodyBuffer(bp)
}

// FileName is a safe file name for the response: the Content-Disposition
// filename if the server sent one, else the URL path and query made safe.
func (r *Response) FileName() string {
	if r.Headers != nil {
		if _, params, err := mime.ParseMediaType(r.Headers.Get("Content-Disposition")); err == nil {
			if f := filepath.Base(params["filename"]); f != "" && f != "." && f != "/" {
				return capFileName(SanitizeFileName(f))
			}
		}
	}
	if r.Request == nil || r.Request.URL == nil {
		return "response"
	}
	name := strings.TrimPrefix(r.Request.URL.Path, "/")
	if q := r.Request.URL.RawQuery; q != "" {
		name += "_" + q
	}
	if name == "" {
		name = "index"
	}
	return capFileName(SanitizeFileName(name))
}

// maxFileName is the longest name most file systems accept (bytes).
const maxFileName = 255

// capFileName shortens a name longer than maxFileName: it keeps the start
// and the extension and puts a hash of the whole name between them, so that
// two long names differing only at the end stay different.
func capFileName(name string) string {
	if len(name) <= maxFileName {
		return name
	}
	ext := filepath.Ext(name)
	if len(ext) > 16 {
		ext = ""
	}
	sum := sha256.Sum256([]byte(name))
	tag := "_" + hex.EncodeToString(sum[:8])
	return name[:maxFileName-len(tag)-len(ext)] + tag + ext
}

// SanitizeFileName replaces characters that are unsafe in file names with
// '_' and keeps the extension. The result has no path separator, no leading
// dot (".bashrc", ".htaccess" and ".git" become "_bashrc", "_htaccess" and
// "_git": a saved page must not become a hidden or configuration file) and
// no trailing dot.
func SanitizeFileName(name string) string {
	if strings.HasPrefix(name, ".") {
		name = "_" + name[1:]
	}
	name = strings.TrimRight(name, ".")
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
				return r
			}
			return '_'
		}, s)
	}
	if ext != "" {
		ext = "." + clean(ext[1:])
	}
	return clean(base) + ext
}
