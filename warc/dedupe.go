package warc

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// The identical-payload index remembers, for each distinct 2xx body of the
// crawl, the capture a later identical body's revisit record refers to. A
// crawl of millions of pages would hold millions of them, so what stays in
// memory is a map from the first 8 bytes of the payload's SHA-1 to where
// the capture lies in an unlinked temporary file (16 bytes an entry, plus
// the map's own); the capture itself (the whole digest, the record ID, URI
// and date) is read back only when a body repeats. The last captures wait
// in a buffer and go to the file a buffer at a time.

// spillSize is how many bytes of captures wait in memory before they are
// written to the file.
const spillSize = 64 << 10

// seenIndex is the identical-payload index of a Writer.
type seenIndex struct {
	mu  sync.Mutex
	pos map[uint64]int64 // digest prefix → offset of the capture
	f   *os.File         // nil until the first spill
	// flushed is how many bytes of captures are in f; pending holds those
	// after them.
	flushed int64
	pending []byte
	// full is set once the file could not be written: the index takes no
	// new capture (later bodies are archived whole), the ones it has stay
	// readable.
	full bool
	// skipped counts the bodies the index did not take once full.
	skipped int
	buf     []byte // scratch for reading a capture back
}

func newSeenIndex() *seenIndex { return &seenIndex{pos: make(map[uint64]int64)} }

// capture is what a revisit record refers to.
type capture struct{ id, uri, date string }

// first records sum (a payload's SHA-1) as archived by c, or, when a body
// with the same digest was archived before, returns that capture and true.
func (s *seenIndex) first(sum [20]byte, c capture) (capture, bool) {
	key := binary.BigEndian.Uint64(sum[:8])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos == nil {
		return capture{}, false // closed: the record will meet ErrClosed
	}
	if off, ok := s.pos[key]; ok {
		prev, psum, err := s.read(off)
		if err == nil && psum == sum {
			return prev, true
		}
		// Another body shares the prefix (or its capture is unreadable):
		// this one is archived whole and the index keeps the first.
		return capture{}, false
	}
	if s.full {
		s.skipped++
		return capture{}, false
	}
	s.pos[key] = s.flushed + int64(len(s.pending))
	s.pending = appendCapture(s.pending, sum, c)
	if len(s.pending) >= spillSize {
		s.spill()
	}
	return capture{}, false
}

// spill writes the pending captures to the file.
func (s *seenIndex) spill() {
	if s.f == nil {
		f, err := os.CreateTemp("", "magpie-warc-seen-*")
		if err != nil {
			s.stop(err)
			return
		}
		_ = os.Remove(f.Name()) // unlinked: a crash leaves nothing behind
		s.f = f
	}
	if _, err := s.f.WriteAt(s.pending, s.flushed); err != nil {
		s.stop(err) // pending stays in memory, readable
		return
	}
	s.flushed += int64(len(s.pending))
	s.pending = s.pending[:0]
}

// stop makes the index take no new capture after its file failed with
// err. Nothing is lost (later identical bodies are archived whole instead
// of as revisits), so the crawl goes on; the log says why and
// Counts.DedupeSkipped how many bodies were not checked.
func (s *seenIndex) stop(err error) {
	s.full = true
	slog.Warn("warc: identical-payload index stopped taking bodies; later repeats are archived whole", "err", err)
}

// count returns how many bodies the index did not take.
func (s *seenIndex) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// read returns the capture at off and its digest.
func (s *seenIndex) read(off int64) (capture, [20]byte, error) {
	var b []byte
	if off >= s.flushed {
		b = s.pending[off-s.flushed:]
	} else {
		if cap(s.buf) < 1<<10 {
			s.buf = make([]byte, 1<<10)
		}
		n, err := s.f.ReadAt(s.buf[:cap(s.buf)], off)
		if n == 0 && err != nil {
			return capture{}, [20]byte{}, err
		}
		b = s.buf[:n]
		if l, k := binary.Uvarint(b); k > 0 && uint64(len(b)-k) < l && off+int64(k)+int64(l) <= s.flushed {
			// Longer than the scratch (a long URI): read all of it.
			s.buf = make([]byte, k+int(l))
			if _, err := s.f.ReadAt(s.buf, off); err != nil {
				return capture{}, [20]byte{}, err
			}
			b = s.buf
		}
	}
	c, sum, ok := decodeCapture(b)
	if !ok {
		return capture{}, [20]byte{}, fmt.Errorf("warc: identical-payload index: bad capture at %d", off)
	}
	return c, sum, nil
}

// appendCapture appends the encoding of c and its digest to b: the length
// of what follows, the digest, then the record ID, URI and date, each
// behind its length.
func appendCapture(b []byte, sum [20]byte, c capture) []byte {
	fields := [...]string{c.id, c.uri, c.date}
	n := len(sum)
	for _, f := range fields {
		n += uvarintLen(uint64(len(f))) + len(f)
	}
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, sum[:]...)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// decodeCapture decodes the capture at the start of b.
func decodeCapture(b []byte) (c capture, sum [20]byte, ok bool) {
	l, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < l || l < uint64(len(sum)) {
		return c, sum, false
	}
	b = b[k : k+int(l)]
	copy(sum[:], b)
	b = b[len(sum):]
	var f [3]string
	for i := range f {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return c, sum, false
		}
		f[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return capture{id: f[0], uri: f[1], date: f[2]}, sum, true
}

// close releases the file.
func (s *seenIndex) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos, s.pending = nil, nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
