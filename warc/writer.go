package warc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc/v3"

	"github.com/magpiecrawl/magpie"
)

// Writer writes the exchanges of a crawl to WARC files in one directory. It
// implements magpie.Archiver: pass Writer.Option (or magpie.WithArchiver(w))
// to the collector. Safe for concurrent use. Close it after the crawl: it
// closes the open file and writes its index. The zero value is not usable;
// build one with New.
type Writer struct {
	dir  string
	opts options
	// recOpts builds every record: sha1 digests in base32, as CDXJ and
	// pywb expect, and bodies past 1 MiB buffered on disk.
	recOpts, httpOpts []gowarc.WarcRecordOption

	// seenMu guards seen: the first capture of each payload digest.
	seenMu sync.Mutex
	seen   map[string]capture

	// mu guards the file and the counts.
	mu     sync.Mutex
	file   *warcFile
	serial int
	closed bool
	counts Counts
	err    error
}

// capture is what a revisit record refers to.
type capture struct{ id, uri, date string }

// Counts are the records a Writer wrote, by WARC-Type (revisits apart).
type Counts struct {
	Files, Warcinfo, Request, Response, Revisit, Resource int
	// Truncated counts response records marked WARC-Truncated: length.
	Truncated int
}

// New returns a Writer into dir (created if missing). A file a killed crawl
// left open (name.warc.gz.open) is recovered first: cut after its last
// whole record, indexed and renamed, so that the new run continues in a new
// file with the next serial number.
func New(dir string, opts ...Option) (*Writer, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	w := &Writer{
		dir: dir, opts: o, seen: make(map[string]capture),
		recOpts: []gowarc.WarcRecordOption{
			gowarc.WithDefaultDigestAlgorithm("sha1"),
			gowarc.WithAddMissingDigest(true),
			gowarc.WithBufferMaxMemBytes(1 << 20),
			gowarc.WithRecordIdFunc(newRecordID),
		},
		// httpOpts build request and response records, whose digests
		// digests computes in one pass: the builder checks nothing again.
		httpOpts: []gowarc.WarcRecordOption{
			gowarc.WithDefaultDigestAlgorithm("sha1"),
			gowarc.WithBufferMaxMemBytes(1 << 20),
			gowarc.WithRecordIdFunc(newRecordID),
			gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore),
			gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
		},
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
	defer w.mu.Unlock()
	return w.counts
}

// Close closes the open file (renaming it from .open and writing its
// CDXJ index) and returns the first error the Writer met, if any. Exchanges
// archived after Close fail with ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.file != nil {
		if err := w.file.close(); err != nil && w.err == nil {
			w.err = err
		}
		w.file = nil
	}
	return w.err
}

// ArchiveExchange writes x as a request and a response record (a revisit
// record for a 304, or for a payload already archived in this crawl).
func (w *Writer) ArchiveExchange(x *magpie.WireExchange) error {
	err := w.archive(x)
	if err != nil && !errors.Is(err, ErrClosed) {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	return err
}

func (w *Writer) archive(x *magpie.WireExchange) error {
	if err := errors.Join(x.Request.Err(), x.Response.Err()); err != nil {
		return fmt.Errorf("%w: %w", ErrRecording, err)
	}
	hreq, err := http.ReadRequest(bufio.NewReader(x.Request.NewReader()))
	if err != nil {
		return fmt.Errorf("%w: request: %w", ErrUnreadableExchange, err)
	}
	target := targetURI(x.Scheme, hreq)
	info, err := inspectResponse(x.Response, hreq)
	if err != nil {
		return fmt.Errorf("%w: response of %s: %w", ErrUnreadableExchange, target, err)
	}
	date := x.Date.UTC()

	resp, err := w.httpRecord(gowarc.Response, "response", x.Response, target, x.RemoteAddr, date)
	if err != nil {
		return err
	}
	defer resp.Close()
	req, err := w.httpRecord(gowarc.Request, "request", x.Request, target, x.RemoteAddr, date)
	if err != nil {
		return err
	}
	defer req.Close()
	if info.truncated {
		resp.WarcHeader().Set(gowarc.WarcTruncated, "length")
	}
	out := resp
	switch {
	case info.status == http.StatusNotModified:
		out, err = resp.ToRevisitRecord(&gowarc.RevisitRef{Profile: gowarc.ProfileServerNotModifiedV1_1})
	case info.status >= 200 && info.status < 300 && info.bodyLen > 0 && !info.truncated && w.opts.dedupe:
		if first, dup := w.firstCapture(resp, target, date); dup {
			out, err = resp.ToRevisitRecord(&gowarc.RevisitRef{
				Profile: gowarc.ProfileIdenticalPayloadDigestV1_1, TargetRecordId: first.id,
				TargetUri: first.uri, TargetDate: first.date,
			})
		}
	}
	if err != nil {
		return fmt.Errorf("warc: revisit record for %s: %w", target, err)
	}
	if out != resp {
		defer out.Close()
	}
	req.WarcHeader().SetId(gowarc.WarcConcurrentTo, out.RecordId())

	line := cdxLine{
		target: target, date: date, mime: info.mime, status: info.status,
		digest: out.WarcHeader().Get(gowarc.WarcPayloadDigest),
	}
	if out.Type() == gowarc.Revisit {
		line.mime = "warc/revisit"
		if line.digest == "" {
			line.digest = resp.WarcHeader().Get(gowarc.WarcPayloadDigest)
		}
	}
	return w.write(out, req, line, info.truncated)
}

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
	err = w.write(rec, nil, cdxLine{}, false)
	if err != nil && !errors.Is(err, ErrClosed) {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	return err
}

// firstCapture records resp's payload digest as archived at target, or
// returns the capture that archived it first.
func (w *Writer) firstCapture(resp gowarc.WarcRecord, target string, date time.Time) (capture, bool) {
	d := resp.WarcHeader().Get(gowarc.WarcPayloadDigest)
	if d == "" {
		return capture{}, false
	}
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	if c, ok := w.seen[d]; ok {
		return c, true
	}
	w.seen[d] = capture{id: resp.RecordId(), uri: target, date: date.Format(time.RFC3339)}
	return capture{}, false
}

// httpRecord builds a request or response record of the bytes b.
func (w *Writer) httpRecord(t gowarc.RecordType, msgtype string, b *magpie.WireBytes, target, ip string, date time.Time) (gowarc.WarcRecord, error) {
	block, payload, err := digests(b.NewReader())
	if err != nil {
		return nil, fmt.Errorf("warc: reading the recorded %s: %w", msgtype, err)
	}
	rb := newBuilder(t, w.httpOpts)
	rb.AddWarcHeader(gowarc.WarcBlockDigest, block)
	rb.AddWarcHeader(gowarc.WarcPayloadDigest, payload)
	// A message in memory is handed over in one Write (bytes.Reader's
	// WriteTo), without the builder's 32 KiB read buffer.
	if _, err := io.Copy(rb, b.NewReader()); err != nil {
		_ = rb.Close()
		return nil, fmt.Errorf("warc: buffering %s record: %w", msgtype, err)
	}
	rb.AddWarcHeader(gowarc.WarcTargetURI, target)
	rb.AddWarcHeaderTime(gowarc.WarcDate, date)
	if ip != "" {
		rb.AddWarcHeader(gowarc.WarcIPAddress, ip)
	}
	rb.AddWarcHeader(gowarc.ContentType, "application/http;msgtype="+msgtype)
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("warc: building %s record for %s: %w", msgtype, target, err)
	}
	return rec, nil
}

// digests returns the sha1 digests (base32) of a recorded HTTP message:
// of all its bytes (WARC-Block-Digest) and of those after its header
// (WARC-Payload-Digest), in one pass.
func digests(r io.Reader) (block, payload string, err error) {
	hb, hp := sha1.New(), sha1.New()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	m := 0 // how much of "\r\n\r\n" ends what was read; 4: in the body
	for {
		n, rerr := r.Read(*bp)
		p := (*bp)[:n]
		hb.Write(p)
		for i := 0; m < 4 && i < len(p); i++ {
			switch c := p[i]; {
			case c == '\r' && m%2 == 0:
				m++
			case c == '\n' && m%2 == 1:
				m++
			case c == '\r':
				m = 1
			default:
				m = 0
			}
			if m == 4 {
				p = p[i+1:] // the loop ends: m is 4
			}
		}
		if m == 4 {
			hp.Write(p)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", "", rerr
		}
	}
	enc := func(h hash.Hash) string { return "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil)) }
	return enc(hb), enc(hp), nil
}

var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// targetURI is the URI the request asked for.
func targetURI(scheme string, r *http.Request) string {
	if r.URL.IsAbs() {
		return r.URL.String() // absolute form, through a proxy
	}
	return scheme + "://" + r.Host + r.RequestURI
}

// responseInfo is what the index and the revisit decision need of a response.
type responseInfo struct {
	status    int
	mime      string
	bodyLen   int64
	truncated bool
}

// inspectResponse reads the recorded response as a client would: a body
// shorter than its framing announces (Content-Length, chunks) was cut.
func inspectResponse(b *magpie.WireBytes, req *http.Request) (responseInfo, error) {
	src := &byteCount{r: b.NewReader()}
	br := bufio.NewReader(src)
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
	n, err := io.Copy(io.Discard, res.Body)
	info.bodyLen = n
	if err != nil {
		info.truncated = true
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

// write appends the response (revisit, resource) record and the request
// record (nil: none) to the current file, opening or rotating it as needed;
// line, unless empty, indexes the first.
func (w *Writer) write(main, req gowarc.WarcRecord, line cdxLine, truncated bool) error {
	a, b := bufPool.Get().(*bytes.Buffer), bufPool.Get().(*bytes.Buffer)
	defer func() {
		for _, buf := range []*bytes.Buffer{a, b} {
			if buf.Cap() <= 4<<20 { // a huge one is left to the GC
				buf.Reset()
				bufPool.Put(buf)
			}
		}
	}()
	if err := compress(a, main); err != nil {
		return err
	}
	if req != nil {
		if err := compress(b, req); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.file == nil {
		f, err := w.open()
		if err != nil {
			return err
		}
		w.file = f
	}
	line.offset = w.file.size
	line.length = int64(a.Len())
	line.filename = w.file.name
	if err := w.file.append(a.Bytes(), b.Bytes(), line); err != nil {
		return err
	}
	switch main.Type() {
	case gowarc.Revisit:
		w.counts.Revisit++
	case gowarc.Resource:
		w.counts.Resource++
	default:
		w.counts.Response++
	}
	if req != nil {
		w.counts.Request++
	}
	if truncated {
		w.counts.Truncated++
	}
	if w.file.size >= w.opts.maxSize {
		err := w.file.close()
		w.file = nil
		return err
	}
	return nil
}

// compress writes rec to dst as one gzip member.
func compress(dst io.Writer, rec gowarc.WarcRecord) error {
	zw := gzipPool.Get().(*gzip.Writer)
	defer gzipPool.Put(zw)
	zw.Reset(dst)
	if _, _, err := gowarc.NewMarshaler().Marshal(zw, rec, 0); err != nil {
		return fmt.Errorf("warc: writing record: %w", err)
	}
	return zw.Close()
}

// gzipPool holds the record compressors: gzip's fastest level, since
// archiving shares the crawl's CPU (a crawl is usually CPU-bound on the
// parsing side; level 1 costs a few percent of size on HTML).
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return zw
}}

// bufPool holds the buffers records are compressed into.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// open starts the next file with its warcinfo record; called under mu.
func (w *Writer) open() (*warcFile, error) {
	w.serial++
	name := fmt.Sprintf("%s-%s-%05d.warc.gz", w.opts.prefix, time.Now().UTC().Format("20060102150405"), w.serial)
	f, err := createFile(w.dir, name)
	if err != nil {
		return nil, err
	}
	info, err := w.warcinfo(name)
	if err == nil {
		var buf bytes.Buffer
		if err = compress(&buf, info); err == nil {
			err = f.append(buf.Bytes(), nil, cdxLine{})
		}
		_ = info.Close()
	}
	if err != nil {
		_ = f.close()
		return nil, err
	}
	w.counts.Files++
	w.counts.Warcinfo++
	return f, nil
}

// warcinfo builds the record that opens a file.
func (w *Writer) warcinfo(name string) (gowarc.WarcRecord, error) {
	rb := newBuilder(gowarc.Warcinfo, w.recOpts)
	rb.AddWarcHeaderTime(gowarc.WarcDate, time.Now().UTC())
	rb.AddWarcHeader(gowarc.WarcFilename, name)
	rb.AddWarcHeader(gowarc.ContentType, gowarc.ApplicationWarcFields)
	var body strings.Builder
	fmt.Fprintf(&body, "software: %s\r\n", w.opts.software)
	body.WriteString("format: WARC File Format 1.1\r\n")
	body.WriteString("conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	for _, kv := range w.opts.info {
		fmt.Fprintf(&body, "%s: %s\r\n", kv[0], kv[1])
	}
	if _, err := rb.WriteString(body.String()); err != nil {
		_ = rb.Close()
		return nil, err
	}
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("warc: building warcinfo: %w", err)
	}
	return rec, nil
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
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// Option configures a Writer.
type Option func(*options)

type options struct {
	prefix   string
	maxSize  int64
	software string
	info     [][2]string
	dedupe   bool
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
