package warc

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
)

// Writer writes the exchanges of a crawl to WARC files in one directory. It
// implements magpie.Archiver: pass Writer.Option (or magpie.WithArchiver(w))
// to the collector. Safe for concurrent use. Close it after the crawl: it
// closes the open file, writes its index and stops the goroutine that
// appends records to the file (started with the first record). The zero
// value is not usable; build one with New.
//
// Each exchange's records are built and compressed by the download worker
// that archives it; the worker then waits until they are in the file, so
// that a crawl killed afterwards still has them.
type Writer struct {
	dir  string
	opts options
	// recOpts builds warcinfo, resource and metadata records: sha1
	// digests in base32, as CDXJ and pywb expect, and bodies past 1 MiB
	// buffered on disk.
	recOpts, httpOpts []gowarc.WarcRecordOption

	// seen is the first capture of each payload digest (nil: NoDedupe).
	seen *seenIndex

	// sendMu guards closed against the sends on queue: a send holds it for
	// reading, Close for writing while it closes queue.
	sendMu sync.RWMutex
	closed bool
	// queue takes the compressed records of each exchange to the commit
	// loop, which appends them to the file; its capacity bounds how many
	// wait, so a slow disk holds the crawl's workers back.
	queue chan *job
	// loop starts the commit loop at the first record; done is closed when
	// it has returned (or by Close, if it never started).
	loop      sync.Once
	done      chan struct{}
	closeOnce sync.Once

	// file and serial belong to the commit loop, and to Close once the
	// loop has returned.
	file   *warcFile
	serial int
	idx    []byte // the index lines of a batch, reused

	// mu guards counts and err.
	mu     sync.Mutex
	counts Counts
	err    error
}

// Counts are the records a Writer wrote, by WARC-Type (revisits apart).
type Counts struct {
	Files, Warcinfo, Request, Response, Revisit, Resource int
	// Metadata counts the metadata records of Outlinks.
	Metadata int
	// Truncated counts response records marked WARC-Truncated: length.
	Truncated int
	// DedupeSkipped counts 2xx bodies archived whole without being checked
	// against the bodies archived before, because the identical-payload
	// index could not write its temporary file ($TMPDIR full or not
	// writable; logged once with slog). Nothing of them is lost: a repeat
	// among them is a response record rather than a revisit.
	DedupeSkipped int
}

// New returns a Writer into dir (created if missing). A file a killed crawl
// left open (name.warc.gz.open, and its unsorted index lines,
// name.cdxj.open) is recovered first: cut after its last whole record,
// indexed from the lines of the records it kept and renamed, so that the
// new run continues in a new file with the next serial number.
func New(dir string, opts ...Option) (*Writer, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	w := &Writer{
		dir: dir, opts: o,
		queue: make(chan *job, queueLen), done: make(chan struct{}),
		recOpts: []gowarc.WarcRecordOption{
			gowarc.WithDefaultDigestAlgorithm("sha1"),
			gowarc.WithAddMissingDigest(true),
			gowarc.WithBufferMaxMemBytes(1 << 20),
			gowarc.WithRecordIdFunc(newRecordID),
		},
		// httpOpts build the response records of revisits, whose digests
		// digests computed in one pass: the builder checks nothing again.
		httpOpts: []gowarc.WarcRecordOption{
			gowarc.WithDefaultDigestAlgorithm("sha1"),
			gowarc.WithRecordIdFunc(newRecordID),
			gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore),
			gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
		},
	}
	if o.dedupe {
		w.seen = newSeenIndex()
	}
	serial, err := recoverDir(dir, o.prefix)
	if err != nil {
		return nil, err
	}
	w.serial = serial
	return w, nil
}

// Option returns the collector option that archives into w.
func (w *Writer) Option() magpie.CollectorOption { return magpie.WithArchiver(w) }

// Counts returns the records written so far.
func (w *Writer) Counts() Counts {
	w.mu.Lock()
	c := w.counts
	w.mu.Unlock()
	if w.seen != nil {
		c.DedupeSkipped = w.seen.count()
	}
	return c
}

// Close waits until the records of every exchange archived so far are
// written, closes the open file (renaming it from .open and writing its
// CDXJ index), stops the Writer's goroutine and returns the first error the
// Writer met, if any. Exchanges archived after Close fail with ErrClosed.
// Call it once the crawl is over; calling it again returns the same error.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.sendMu.Lock()
		w.closed = true
		close(w.queue)
		w.sendMu.Unlock()
		w.loop.Do(func() { close(w.done) }) // never started: nothing to wait for
		<-w.done
		if w.file != nil {
			w.fail(w.file.close())
			w.file = nil
		}
		if w.seen != nil {
			_ = w.seen.close() // an unlinked scratch file: nothing is lost
		}
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail keeps err, unless nil or ErrClosed, as the Writer's first error.
func (w *Writer) fail(err error) {
	if err == nil || errors.Is(err, ErrClosed) {
		return
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// ArchiveExchange writes x as a request and a response record (a revisit
// record for a 304, or for a payload already archived in this crawl). A
// 304's record refers to x.Original, when set, and carries its payload
// digest; for a whole 2xx answer (not a HEAD's) the Writer sets
// x.Archived to the record that holds its payload, for a recrawl to keep.
func (w *Writer) ArchiveExchange(x *magpie.WireExchange) error {
	err := w.archive(x)
	w.fail(err)
	return err
}

func (w *Writer) archive(x *magpie.WireExchange) error {
	if err := errors.Join(x.Request.Err(), x.Response.Err()); err != nil {
		return fmt.Errorf("%w: %w", ErrRecording, err)
	}
	br := readerPool.Get().(*bufio.Reader)
	defer func() {
		br.Reset(nil) // keeps no reference to the exchange's bytes
		readerPool.Put(br)
	}()
	src := &byteCount{r: x.Request.NewReader()}
	br.Reset(src)
	hreq, err := http.ReadRequest(br)
	if err != nil {
		return fmt.Errorf("%w: request: %w", ErrUnreadableExchange, err)
	}
	target := targetURI(x.Scheme, hreq)
	rq, err := inspectRequest(hreq, x.Request, src.n-int64(br.Buffered()))
	if err != nil {
		return fmt.Errorf("warc: reading the recorded request: %w", err)
	}
	info, err := inspectResponse(br, x.Response, hreq)
	if err != nil {
		return fmt.Errorf("%w: response of %s: %w", ErrUnreadableExchange, target, err)
	}
	date := x.Date.UTC()

	block, payload, err := digests(x.Response)
	if err != nil {
		return fmt.Errorf("warc: reading the recorded response: %w", err)
	}
	if info.chunked {
		// WARC's payload is the entity body: the chunked framing off,
		// any content encoding kept (WARC 1.1, section 5.9).
		payload = info.payload
	}
	id, err := newRecordID()
	if err != nil {
		return fmt.Errorf("warc: record ID: %w", err)
	}
	stamp := date.Format(time.RFC3339Nano)
	m := httpMessage{
		typ: gowarc.Response, b: x.Response, id: id, target: target, ip: x.RemoteAddr,
		date: stamp, block: block, payload: payload, truncated: info.truncated,
	}
	// What a recrawl keeps of a full answer, for a later 304 to refer to
	// (a HEAD's answer has no payload to stand for).
	keep := info.status/100 == 2 && !info.truncated && hreq.Method != http.MethodHead
	if keep {
		x.Archived = storage.Capture{RecordID: id, URI: target, Date: date, PayloadDigest: sha1Label(payload)}
	}
	var ref *gowarc.RevisitRef
	switch {
	case info.status == http.StatusNotModified:
		// The payload of a server-not-modified revisit is the original's
		// (WARC 1.1, section 6.7.2): named when the recrawl knows it,
		// left out (rather than the digest of no body) when it does not.
		ref = &gowarc.RevisitRef{Profile: gowarc.ProfileServerNotModifiedV1_1}
		m.payload, m.noPayload = [20]byte{}, true
		if o := x.Original; !o.IsZero() {
			ref.TargetRecordId, ref.TargetUri = o.RecordID, o.URI
			if !o.Date.IsZero() {
				ref.TargetDate = o.Date.UTC().Format(time.RFC3339Nano)
			}
			m.payloadLabel, m.noPayload = o.PayloadDigest, o.PayloadDigest == ""
			m.payload, _ = parseSHA1Label(o.PayloadDigest)
			x.Archived = o
		}
	case info.status >= 200 && info.status < 300 && info.bodyLen > 0 && !info.truncated && w.seen != nil:
		if first, dup := w.seen.first(payload, capture{id: id, uri: target, date: stamp}); dup {
			ref = &gowarc.RevisitRef{
				Profile: gowarc.ProfileIdenticalPayloadDigestV1_1, TargetRecordId: first.id,
				TargetUri: first.uri, TargetDate: first.date,
			}
			if keep {
				// The record that holds the payload is the first one.
				d, _ := time.Parse(time.RFC3339Nano, first.date)
				x.Archived = storage.Capture{RecordID: first.id, URI: first.uri, Date: d, PayloadDigest: sha1Label(payload)}
			}
		}
	}
	indexDigest := m.payload // the index's digest (zero: none)
	var out record = m.raw()
	if ref != nil {
		// A revisit record keeps the response's HTTP header: gowarc finds
		// where it ends.
		resp, err := w.httpRecord(m)
		if err != nil {
			return err
		}
		defer resp.Close()
		rev, err := resp.ToRevisitRecord(ref)
		if err != nil {
			return fmt.Errorf("warc: revisit record for %s: %w", target, err)
		}
		defer rev.Close()
		out = gowarcRecord{rev}
	}

	m = httpMessage{typ: gowarc.Request, b: x.Request, target: target, ip: x.RemoteAddr, date: stamp, concurrent: id}
	if m.block, m.payload, err = digests(x.Request); err != nil {
		return fmt.Errorf("warc: reading the recorded request: %w", err)
	}
	if rq.chunked {
		m.payload = rq.payload
	}
	if m.id, err = newRecordID(); err != nil {
		return fmt.Errorf("warc: record ID: %w", err)
	}
	req := m.raw()
	var meta record
	if w.opts.outlinks && out.kind() == gowarc.Response && info.status/100 == 2 && !info.truncated && isHTML(info.mime) {
		if links := pageLinks(br, x.Response, hreq, target); len(links) > 0 {
			rec, err := w.metadataRecord(links, target, id, date)
			if err != nil {
				return err
			}
			defer rec.Close()
			meta = gowarcRecord{rec}
		}
	}

	line := cdxLine{target: target, date: date, mime: info.mime, status: info.status, digest: indexDigest, method: hreq.Method, key: rq.key}
	if out.kind() == gowarc.Revisit {
		line.mime = "warc/revisit"
	}
	return w.write(line, info.truncated, out, req, meta)
}

// readerPool holds the readers the recorded messages are parsed with.
var readerPool = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

// renderedScheme prefixes the URI of a page a Fetcher downloaded (render's
// DOM after scripts ran): the record is not what the server sent, so it
// must not be replayed as the URL's capture.
const renderedScheme = "urn:magpie:dom:"

// ArchiveFetched writes a page a Fetcher downloaded (render's DOM after
// scripts ran) as a resource record whose WARC-Target-URI is the page's
// URL behind urn:magpie:dom:, so that replay tools do not take it for the
// server's response. It is not listed in the CDXJ index.
func (w *Writer) ArchiveFetched(fr *magpie.FetchRequest, res *magpie.FetchResult, date time.Time) error {
	u := fr.URL
	if res.FinalURL != nil {
		u = res.FinalURL
	}
	target := renderedScheme + u.String()
	rb := newBuilder(gowarc.Resource, w.recOpts)
	if _, err := rb.Write(res.Body); err != nil {
		_ = rb.Close()
		return fmt.Errorf("warc: buffering resource record: %w", err)
	}
	rb.AddWarcHeader(gowarc.WarcTargetURI, target)
	rb.AddWarcHeaderTime(gowarc.WarcDate, date.UTC())
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		ct = "text/html"
	}
	rb.AddWarcHeader(gowarc.ContentType, ct)
	rec, _, err := rb.Build()
	if err != nil {
		return fmt.Errorf("warc: building resource record for %s: %w", target, err)
	}
	defer rec.Close()
	err = w.write(cdxLine{}, false, gowarcRecord{rec}, nil, nil)
	w.fail(err)
	return err
}

// httpMessage is a recorded request or response and what its record says
// of it.
type httpMessage struct {
	typ                  gowarc.RecordType
	b                    *magpie.WireBytes
	id, target, ip, date string
	concurrent           string // in a request's record: the response's record ID
	block, payload       [20]byte
	// payloadLabel, when set, is the WARC-Payload-Digest written instead
	// of payload's (a 304's revisit: the original's); noPayload leaves the
	// field out.
	payloadLabel string
	noPayload    bool
	truncated    bool
}

// payloadField is m's WARC-Payload-Digest, and whether it has one.
func (m httpMessage) payloadField() (string, bool) {
	switch {
	case m.noPayload:
		return "", false
	case m.payloadLabel != "":
		return m.payloadLabel, true
	}
	return sha1Label(m.payload), true
}

// raw returns the record of m, written from the recorded message itself.
// Its digests were computed as the bytes were read once, so neither
// gowarc's record builder (which would copy the block and parse it again)
// nor its block reader (which would hash it again) touches them.
func (m httpMessage) raw() *rawRecord {
	h := make([]byte, 0, 448+len(m.target))
	field := func(name, value string) {
		h = append(h, name...)
		h = append(h, ": "...)
		h = append(h, value...)
		h = append(h, "\r\n"...)
	}
	h = append(h, "WARC/1.1\r\n"...)
	field(gowarc.WarcType, m.typ.String())
	field(gowarc.WarcRecordID, "<"+m.id+">")
	field(gowarc.WarcDate, m.date)
	field(gowarc.WarcTargetURI, m.target)
	if m.ip != "" {
		field(gowarc.WarcIPAddress, m.ip)
	}
	if m.concurrent != "" {
		field(gowarc.WarcConcurrentTo, "<"+m.concurrent+">")
	}
	field(gowarc.WarcBlockDigest, sha1Label(m.block))
	if p, ok := m.payloadField(); ok {
		field(gowarc.WarcPayloadDigest, p)
	}
	if m.truncated {
		field(gowarc.WarcTruncated, "length")
	}
	msgtype := "request"
	if m.typ == gowarc.Response {
		msgtype = "response"
	}
	field(gowarc.ContentType, "application/http;msgtype="+msgtype)
	field(gowarc.ContentLength, strconv.FormatInt(m.b.Len(), 10))
	h = append(h, "\r\n"...)
	return &rawRecord{typ: m.typ, head: h, b: m.b}
}

// rawRecord is a request or response record: its WARC header, then the
// recorded message as its block.
type rawRecord struct {
	typ  gowarc.RecordType
	head []byte
	b    *magpie.WireBytes
}

func (r *rawRecord) kind() gowarc.RecordType { return r.typ }
func (r *rawRecord) blockLen() int64         { return r.b.Len() }

func (r *rawRecord) marshal(w io.Writer) error {
	if _, err := w.Write(r.head); err != nil {
		return err
	}
	if _, err := io.Copy(w, r.b.NewReader()); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\r\n\r\n")
	return err
}

// httpRecord builds the response record of m with gowarc, which parses its
// HTTP block (a revisit record keeps its header only), in a buffer of the
// message's size.
func (w *Writer) httpRecord(m httpMessage) (gowarc.WarcRecord, error) {
	opts := append(w.httpOpts[:len(w.httpOpts):len(w.httpOpts)], gowarc.WithBufferMaxMemBytes(min(max(m.b.Len(), 512), bufferMax)))
	rb := newBuilder(m.typ, opts)
	rb.AddWarcHeader(gowarc.WarcRecordID, "<"+m.id+">")
	rb.AddWarcHeader(gowarc.WarcBlockDigest, sha1Label(m.block))
	if p, ok := m.payloadField(); ok {
		rb.AddWarcHeader(gowarc.WarcPayloadDigest, p)
	}
	if _, err := io.Copy(rb, m.b.NewReader()); err != nil {
		_ = rb.Close()
		return nil, fmt.Errorf("warc: buffering response record: %w", err)
	}
	rb.AddWarcHeader(gowarc.WarcTargetURI, m.target)
	rb.AddWarcHeader(gowarc.WarcDate, m.date)
	if m.ip != "" {
		rb.AddWarcHeader(gowarc.WarcIPAddress, m.ip)
	}
	rb.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("warc: building response record for %s: %w", m.target, err)
	}
	return rec, nil
}

// bufferMax is how much of a record's block gowarc keeps in memory; the
// rest goes to a temporary file.
const bufferMax = 1 << 20

// digests returns the SHA-1 sums of a recorded HTTP message: of all its
// bytes (WARC-Block-Digest) and of those after its header
// (WARC-Payload-Digest), in one pass over the bytes where they lie.
func digests(b *magpie.WireBytes) (block, payload [20]byte, err error) {
	d := digesterPool.Get().(*digester)
	defer digesterPool.Put(d)
	d.block.Reset()
	d.payload.Reset()
	d.m = 0
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	// A message in memory reaches Write in one call (bytes.Reader's
	// WriteTo); one in a file through the buffer.
	if _, err := io.CopyBuffer(d, b.NewReader(), *bp); err != nil {
		return block, payload, err
	}
	d.block.Sum(block[:0])
	d.payload.Sum(payload[:0])
	return block, payload, nil
}

// digester hashes what is written to it twice: all of it, and what follows
// the first CRLF CRLF.
type digester struct {
	block, payload hash.Hash
	m              int // how much of "\r\n\r\n" ends what was written; 4: in the body
}

func (d *digester) Write(p []byte) (int, error) {
	n := len(p)
	d.block.Write(p)
	for i := 0; d.m < 4 && i < len(p); i++ {
		switch c := p[i]; {
		case c == '\r' && d.m%2 == 0:
			d.m++
		case c == '\n' && d.m%2 == 1:
			d.m++
		case c == '\r':
			d.m = 1
		default:
			d.m = 0
		}
		if d.m == 4 {
			p = p[i+1:] // the loop ends: m is 4
		}
	}
	if d.m == 4 {
		d.payload.Write(p)
	}
	return n, nil
}

var digesterPool = sync.Pool{New: func() any { return &digester{block: sha1.New(), payload: sha1.New()} }}

// sha1Label is a SHA-1 sum as WARC digest fields and CDXJ have it: "sha1:"
// and base32.
func sha1Label(sum [20]byte) string {
	var b [5 + 32]byte
	copy(b[:], "sha1:")
	base32.StdEncoding.Encode(b[5:], sum[:])
	return string(b[:])
}

// parseSHA1Label reads a digest written as sha1Label writes it.
func parseSHA1Label(s string) ([20]byte, bool) {
	var sum [20]byte
	b32, ok := strings.CutPrefix(s, "sha1:")
	if !ok {
		return sum, false
	}
	n, err := base32.StdEncoding.Decode(sum[:], []byte(b32))
	return sum, err == nil && n == len(sum)
}

var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// targetURI is the URI the request asked for.
func targetURI(scheme string, r *http.Request) string {
	if r.URL.IsAbs() {
		return r.URL.String() // absolute form, through a proxy
	}
	return scheme + "://" + r.Host + r.RequestURI
}

// requestInfo is what the records and the index need of a request.
type requestInfo struct {
	// chunked is set for a body sent with chunked transfer coding; payload
	// is then the SHA-1 of the body with its framing taken off.
	chunked bool
	payload [20]byte
	// key is what the index key of a request other than a GET adds.
	key methodKey
}

// inspectRequest reads what the records and index need of hreq, just read
// from the recorded request b, whose header is head bytes long: a chunked
// body's payload digest, and the key of a request other than a GET, from
// the body as recorded (warcio keys it so).
func inspectRequest(hreq *http.Request, b *magpie.WireBytes, head int64) (requestInfo, error) {
	var info requestInfo
	if slices.Contains(hreq.TransferEncoding, "chunked") {
		h := sha1.New()
		if _, err := io.Copy(h, hreq.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return info, err
		}
		info.chunked = true
		h.Sum(info.payload[:0])
	}
	if hreq.Method == http.MethodGet {
		return info, nil
	}
	r := b.NewReader()
	if _, err := io.CopyN(io.Discard, r, head); err != nil {
		return info, err
	}
	body, err := io.ReadAll(io.LimitReader(r, maxKeyBody))
	if err != nil {
		return info, err
	}
	info.key = keyForMethod(hreq.Method, hreq.Header.Get("Content-Type"), body)
	return info, nil
}

// responseInfo is what the index and the revisit decision need of a response.
type responseInfo struct {
	status    int
	mime      string
	bodyLen   int64
	truncated bool
	// chunked is set for a body sent with chunked transfer coding; payload
	// is then the SHA-1 of the body with its framing taken off.
	chunked bool
	payload [20]byte
}

// inspectResponse reads the recorded response as a client would: a body
// shorter than its framing announces (Content-Length, chunks) was cut.
func inspectResponse(br *bufio.Reader, b *magpie.WireBytes, req *http.Request) (responseInfo, error) {
	src := &byteCount{r: b.NewReader()}
	br.Reset(src)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return responseInfo{}, err
	}
	defer res.Body.Close()
	info := responseInfo{status: res.StatusCode, mime: mediaType(res.Header.Get("Content-Type"))}
	if req.Method == http.MethodHead {
		return info, nil
	}
	if res.ContentLength >= 0 && len(res.TransferEncoding) == 0 {
		// Framed by Content-Length: what was recorded past the headers
		// tells, without reading the body again.
		head := src.n - int64(br.Buffered())
		info.bodyLen = min(b.Len()-head, res.ContentLength)
		info.truncated = b.Len()-head < res.ContentLength
		return info, nil
	}
	// Chunked (or framed by the connection's end): the body is read as a
	// client reads it, framing taken off, and hashed on the way.
	h := digesterPool.Get().(*digester)
	defer digesterPool.Put(h)
	h.payload.Reset()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	n, err := io.CopyBuffer(h.payload, res.Body, *bp)
	info.bodyLen = n
	if err != nil {
		info.truncated = true
	}
	if slices.Contains(res.TransferEncoding, "chunked") {
		info.chunked = true
		h.payload.Sum(info.payload[:0])
	}
	return info, nil
}

// byteCount counts the bytes read through it.
type byteCount struct {
	r io.Reader
	n int64
}

func (c *byteCount) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if mt == "" {
		return "unk"
	}
	return mt
}

// builderMu serialises gowarc.NewRecordBuilder, which sets a global of
// github.com/google/uuid (EnableRandPool) without a lock each time it is
// called; records get their IDs from newRecordID, which does not read it.
var builderMu sync.Mutex

func newBuilder(t gowarc.RecordType, opts []gowarc.WarcRecordOption) gowarc.WarcRecordBuilder {
	builderMu.Lock()
	defer builderMu.Unlock()
	return gowarc.NewRecordBuilder(t, opts...)
}

// newRecordID returns a random (version 4) UUID URN.
func newRecordID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [len("urn:uuid:") + 36]byte
	n := copy(s[:], "urn:uuid:")
	for i, part := range [...][]byte{b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]} {
		if i > 0 {
			s[n] = '-'
			n++
		}
		n += hex.Encode(s[n:], part)
	}
	return string(s[:]), nil
}

// Option configures a Writer.
type Option func(*options)

type options struct {
	prefix   string
	maxSize  int64
	software string
	info     [][2]string
	dedupe   bool
	outlinks bool
}

// oneLine keeps a warcinfo field on its line.
var oneLine = strings.NewReplacer("\r", " ", "\n", " ")

func defaultOptions() options {
	return options{prefix: "magpie", maxSize: 1 << 30, software: "magpie", dedupe: true}
}

// Prefix sets the start of every file name (default "magpie"): files are
// named prefix-YYYYMMDDhhmmss-NNNNN.warc.gz.
func Prefix(p string) Option { return func(o *options) { o.prefix = p } }

// MaxFileSize sets the size (compressed bytes) past which a file is closed
// and the next record starts a new one (default 1 GiB).
func MaxFileSize(n int64) Option { return func(o *options) { o.maxSize = max(n, 1) } }

// Software names the crawler in each warcinfo record (default "magpie").
func Software(s string) Option { return func(o *options) { o.software = s } }

// Info adds a field to each warcinfo record (crawl settings: "robots",
// "obey"; "operator", a name). Fields keep the order they are given in.
func Info(name, value string) Option {
	return func(o *options) { o.info = append(o.info, [2]string{oneLine.Replace(name), oneLine.Replace(value)}) }
}

// NoDedupe writes every 2xx body in full, even one identical to a body
// already archived in the crawl (default: such a body becomes a revisit
// record, profile identical-payload-digest).
func NoDedupe() Option { return func(o *options) { o.dedupe = false } }
