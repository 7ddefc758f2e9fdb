package warc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc/v3"
)

// The records of an exchange are built and compressed by the worker that
// archives it, many at once; one goroutine, the commit loop, appends them
// to the file. It takes every exchange waiting in the queue at once (a
// group commit): one write for the lot and one for their index lines,
// instead of a lock taken and two writes made per exchange. The worker
// waits until its records are in the file, so that an exchange archived
// before a crawl is killed is in the file the next run recovers.

// queueLen bounds the exchanges waiting for the commit loop; maxBatch is
// the most it writes at once.
const (
	queueLen = 64
	maxBatch = 64
)

// job is one exchange on its way to the file: its response (revisit,
// resource) record, then its request and metadata records (each may be
// missing), as gzip members.
type job struct {
	main, req, meta bytes.Buffer
	line            cdxLine // the main record's index line, unless target is ""
	head, tail      []byte  // keep line.head's and line.tail's buffers across uses
	kind            gowarc.RecordType
	hasReq, hasMeta bool
	truncated       bool
	done            chan error // the commit loop's answer
}

var jobPool = sync.Pool{New: func() any { return &job{done: make(chan error, 1)} }}

// release returns j to the pool; a buffer grown past 4 MiB is left to the
// garbage collector.
func (j *job) release() {
	for _, b := range []*bytes.Buffer{&j.main, &j.req, &j.meta} {
		if b.Cap() > 4<<20 {
			*b = bytes.Buffer{}
		}
		b.Reset()
	}
	j.line = cdxLine{}
	jobPool.Put(j)
}

// write compresses the response (revisit, resource) record main, the
// request record req and the metadata record meta (nil: none) and hands
// them to the commit loop; line, unless empty, indexes main. It returns
// once they are in the file.
func (w *Writer) write(line cdxLine, truncated bool, main, req, meta record) error {
	j := jobPool.Get().(*job)
	defer j.release()
	if err := compress(&j.main, main); err != nil {
		return err
	}
	if req != nil {
		if err := compress(&j.req, req); err != nil {
			return err
		}
	}
	if meta != nil {
		if err := compress(&j.meta, meta); err != nil {
			return err
		}
	}
	j.line, j.kind, j.truncated = line, main.kind(), truncated
	if line.target != "" {
		j.line.head = line.appendHead(j.head[:0])
		j.line.tail = line.appendMethod(j.tail[:0])
		j.head, j.tail = j.line.head, j.line.tail
	}
	j.hasReq, j.hasMeta = req != nil, meta != nil

	w.sendMu.RLock()
	if w.closed {
		w.sendMu.RUnlock()
		return ErrClosed
	}
	w.loop.Do(func() { go w.commitLoop() })
	// The loop answers every job it receives, and Close waits for it:
	// neither this send nor the answer can be left waiting.
	w.queue <- j
	w.sendMu.RUnlock()
	return <-j.done
}

// commitLoop appends the queued records to the file until Close closes
// the queue.
func (w *Writer) commitLoop() {
	defer close(w.done)
	var batch []*job
	for j := range w.queue {
		batch = append(batch[:0], j)
	more:
		for len(batch) < maxBatch {
			select {
			case j, ok := <-w.queue:
				if !ok {
					break more
				}
				batch = append(batch, j)
			default:
				break more
			}
		}
		for len(batch) > 0 {
			n, err := w.commit(batch)
			for _, j := range batch[:n] {
				j.done <- err
			}
			batch = batch[n:]
		}
	}
}

// commit appends the first jobs of batch to the current file, opening it
// if needed, and closes the file once it reached the size limit; it
// returns how many jobs it took and the error they met.
func (w *Writer) commit(batch []*job) (int, error) {
	if w.file == nil {
		f, err := w.open()
		if err != nil {
			return len(batch), err
		}
		w.file = f
	}
	f := w.file
	members := make([][]byte, 0, 3*len(batch))
	idx := w.idx[:0]
	var add Counts
	end, n := f.size, 0
	for _, j := range batch {
		n++
		if j.line.target != "" {
			idx = append(idx, j.line.head...)
			idx = appendTail(idx, end, int64(j.main.Len()), f.name, j.line.tail)
		}
		members = append(members, j.main.Bytes())
		end += int64(j.main.Len())
		switch j.kind {
		case gowarc.Revisit:
			add.Revisit++
		case gowarc.Resource:
			add.Resource++
		default:
			add.Response++
		}
		if j.hasReq {
			members = append(members, j.req.Bytes())
			end += int64(j.req.Len())
			add.Request++
		}
		if j.hasMeta {
			members = append(members, j.meta.Bytes())
			end += int64(j.meta.Len())
			add.Metadata++
		}
		if j.truncated {
			add.Truncated++
		}
		if end >= w.opts.maxSize {
			break
		}
	}
	w.idx = idx
	if err := f.append(members, idx); err != nil {
		return n, err
	}
	w.mu.Lock()
	w.counts.Response += add.Response
	w.counts.Request += add.Request
	w.counts.Revisit += add.Revisit
	w.counts.Resource += add.Resource
	w.counts.Metadata += add.Metadata
	w.counts.Truncated += add.Truncated
	w.mu.Unlock()
	if f.size >= w.opts.maxSize {
		w.file = nil
		return n, f.close()
	}
	return n, nil
}

// record is a record on its way to a file.
type record interface {
	kind() gowarc.RecordType
	blockLen() int64 // < 0: unknown
	// marshal writes the record, uncompressed.
	marshal(w io.Writer) error
}

// gowarcRecord is a record gowarc built.
type gowarcRecord struct{ gowarc.WarcRecord }

func (r gowarcRecord) kind() gowarc.RecordType { return r.Type() }

func (r gowarcRecord) blockLen() int64 {
	if n, err := r.ContentLength(); err == nil {
		return n
	}
	return -1
}

func (r gowarcRecord) marshal(w io.Writer) error {
	_, _, err := gowarc.NewMarshaler().Marshal(w, r.WarcRecord, 0)
	return err
}

// compress writes rec to dst as one gzip member.
func compress(dst io.Writer, rec record) error {
	pool := &gzipPool
	if n := rec.blockLen(); n >= 0 && n < storeBelow {
		pool = &storePool
	}
	zw := pool.Get().(*copyWriter)
	defer pool.Put(zw)
	zw.Reset(dst)
	if err := rec.marshal(zw); err != nil {
		return fmt.Errorf("warc: writing record: %w", err)
	}
	return zw.Close()
}

// copyWriter is a gzip writer that copies from a reader through its own
// buffer: gowarc's marshaler io.Copies each block into it, which would
// otherwise allocate 32 KiB per record.
type copyWriter struct {
	*gzip.Writer
	buf []byte
}

func (c *copyWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.CopyBuffer(c.Writer, r, c.buf)
}

// gzipPool holds the record compressors: gzip's fastest level (1), which
// WARC allows (any level; one member per record), since archiving shares
// the crawl's CPU.
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return &copyWriter{Writer: zw, buf: make([]byte, 32<<10)}
}}

// storeBelow is the block size under which a record's gzip member stores
// it uncompressed (deflate's stored blocks: still a gzip member every
// reader takes). Such a record, most often a GET request of a few hundred
// bytes, would shrink by a couple of hundred bytes at most, for the CPU a
// whole page costs: deflate builds its Huffman tables per member whatever
// its size.
const storeBelow = 512

// storePool holds the compressors of records under storeBelow.
var storePool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.NoCompression) // a valid level: no error
	return &copyWriter{Writer: zw, buf: make([]byte, 4<<10)}
}}

// open starts the next file with its warcinfo record; called by the commit
// loop.
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
		if err = compress(&buf, gowarcRecord{info}); err == nil {
			err = f.append([][]byte{buf.Bytes()}, nil)
		}
		_ = info.Close()
	}
	if err != nil {
		_ = f.close()
		return nil, err
	}
	w.mu.Lock()
	w.counts.Files++
	w.counts.Warcinfo++
	w.mu.Unlock()
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
