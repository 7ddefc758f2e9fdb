package magpie

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// maxScratch is the largest read buffer kept for reuse: a rare huge body
// must not pin its buffer for the rest of the crawl.
const maxScratch = 1 << 20

// scratchPool holds read buffers (*[]byte) reused across responses whose
// length is not known in advance. A body is read into one and copied out
// at its exact size: one allocation per body, where growing a fresh buffer
// takes several and up to twice the bytes. The slice handed to callbacks
// (Response.Body) is always the copy, never a pooled buffer, so that users
// may keep it (the copy's buffer is recycled only once nothing reaches it:
// see body_recycle.go).
var scratchPool = sync.Pool{New: func() any {
	b := make([]byte, 0, defaultReadSize*2)
	return &b
}}

// exactLength reports whether the body's decoded length is known before
// reading: Content-Length of an unencoded body. Such a body is read into a
// buffer of its size directly.
func exactLength(header http.Header, codings []string) bool {
	if len(codings) > 0 {
		return false
	}
	cl, err := strconv.ParseInt(header.Get("Content-Length"), 10, 64)
	return err == nil && cl >= 0 && cl <= maxPresize
}

// readScratch is readLimited for a body of unknown length: read into a
// pooled buffer, returned as an exact-size copy.
func readScratch(r io.Reader, max int64) ([]byte, bool, error) {
	bp := scratchPool.Get().(*[]byte)
	buf, truncated, err := readInto((*bp)[:0], r, max)
	out := newBodyBuffer(len(buf))[:len(buf)]
	copy(out, buf)
	finishBody(out)
	if cap(buf) <= maxScratch {
		*bp = buf[:0]
		scratchPool.Put(bp)
	}
	return out, truncated, err
}

// bodyBuffers holds the buffers ReuseBody reads bodies into (*[]byte). One
// is a page's Response.Body from the read until the collector is done with
// the page (Response.releaseBody).
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxReusedBody is the largest ReuseBody buffer kept: a page larger than
// that is rare, and its buffer, kept, would hold its size for every small
// page after it (a crawl of large manual pages peaked 15 MB higher with
// buffers of up to 1 MB kept).
const maxReusedBody = maxPresize

// putBodyBuffer returns bp, no longer read by anyone, to bodyBuffers.
func putBodyBuffer(bp *[]byte) {
	if cap(*bp) > maxReusedBody {
		return
	}
	*bp = (*bp)[:0]
	bodyBuffers.Put(bp)
}

// readReused is readLimited into *buf, a ReuseBody buffer: grown as needed,
// *buf is left holding the grown buffer. The body's capacity ends at its
// length: the buffer's rest holds earlier pages, which a caller reslicing
// Response.Body up to its capacity must not see (finishBody clears that
// rest of a recycled buffer; cutting the capacity costs nothing).
func readReused(r io.Reader, size, max int64, buf *[]byte) ([]byte, bool, error) {
	if max > 0 {
		size = min(size, max)
	}
	size = min(size, maxPresize)
	body, truncated, err := readInto(slices.Grow((*buf)[:0], int(size)+1), r, max)
	*buf = body[:0]
	return body[:len(body):len(body)], truncated, err
}
