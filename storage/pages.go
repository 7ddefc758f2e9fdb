package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"time"
)

// ErrBadPageState is returned by PageState.UnmarshalBinary when the bytes are
// not a page state this package wrote (truncated, or of an unknown version).
var ErrBadPageState = errors.New("storage: malformed page state")

// PageState is what a recrawl remembers of one URL between crawls: when it
// was fetched and with what answer, the validators for a conditional request,
// a digest of its body, its revisit schedule and, when the crawl archives,
// the capture of its last full answer. The zero value is "never fetched".
// Times are kept to the millisecond (LastModified to the second, as HTTP
// dates are; Capture.Date to the nanosecond, as WARC-Date is written), so a
// state read back equals the state written after Truncate.
type PageState struct {
	// URL is the URL that was fetched, so that a due page can be requested
	// again without a link to it.
	URL string
	// Fetched is when the last answer arrived.
	Fetched time.Time
	// Status is the HTTP status of the last answer (304 is not stored: a
	// Not Modified answer keeps the status it confirms).
	Status int
	// ETag and LastModified are the validators of the last full answer,
	// sent back as If-None-Match and If-Modified-Since. Empty and zero when
	// the server sent none.
	ETag         string
	LastModified time.Time
	// Digest is a 64-bit hash of the last body, to tell an unchanged page
	// from a server that sends no validators. The magpie package sets it
	// from 2xx answers only, never to 0: 0 is a URL that never answered 2xx.
	Digest uint64
	// Due is when the page should be fetched again.
	Due time.Time
	// Interval is the current revisit interval, adapted at every fetch.
	Interval time.Duration
	// Change is the outcome of the last fetch, as the magpie package numbers
	// it (magpie.Change); stores keep it without interpreting it.
	Change uint8
	// Depth is the request depth the page was last fetched at, so that a
	// revisit queued from the store keeps the depth its crawl found it at.
	// 0 in a state written before depths were kept (encoding version 1).
	Depth int
	// Capture is the archived record of the last full answer (zero when
	// the crawl did not archive it), which the record of a later 304
	// refers to.
	Capture Capture
}

// Capture names an archived record, as an Archiver reported it
// (magpie.WireExchange.Archived): a WARC record holding a page's payload,
// which the revisit record of a later 304 for the page refers to
// (WARC-Refers-To, WARC-Refers-To-Target-URI, WARC-Refers-To-Date) and
// whose payload digest it repeats. The zero value is none.
type Capture struct {
	// RecordID is the record's WARC-Record-ID, without its angle brackets
	// ("urn:uuid:…").
	RecordID string
	// URI is its WARC-Target-URI.
	URI string
	// Date is its WARC-Date.
	Date time.Time
	// PayloadDigest is its WARC-Payload-Digest ("sha1:…").
	PayloadDigest string
}

// IsZero reports whether c names no record.
func (c Capture) IsZero() bool { return c.RecordID == "" }

// Page is a PageState with the visited key (request ID) it belongs to.
type Page struct {
	// ID is the request's visited key, the same ID the visited set holds.
	ID uint64
	// State is what is remembered of it.
	State PageState
}

// PageStore is implemented by stores that remember a PageState per URL
// beside their visited set, which a recrawl (magpie.Recrawl) needs. It is an
// optional upgrade: a Storage without it (a Colly storage) still crawls, but
// cannot recrawl. Implementations must be safe for concurrent use; the memory
// store, sqlitestore and redisstore implement it.
type PageStore interface {
	// GetPages returns the stored state of each ID, in order; found[i] is
	// false (and states[i] zero) for an ID with no state.
	GetPages(ctx context.Context, ids ...uint64) (states []PageState, found []bool, err error)
	// PutPages stores each page's state, replacing what was stored for its
	// ID. A batch need not be atomic: on error some may be stored.
	PutPages(ctx context.Context, pages ...Page) error
	// DuePages yields every stored page whose Due is not after before, in
	// no particular order, then stops; an error ends the sequence. The
	// store may be read and written while the sequence runs; a page written
	// meanwhile may or may not be yielded, and none is yielded twice.
	DuePages(ctx context.Context, before time.Time) iter.Seq2[Page, error]
}

// LeasePage is the page state a leased queue entry's fetch produced, to be
// stored when that lease is acknowledged (PageAcker).
type LeasePage struct {
	// Lease is the lease ID of the entry, as Queue.Lease returned it.
	Lease string
	// Page is the state to store.
	Page Page
}

// PageAcker is implemented by a store that is both the Queue and the
// PageStore of a crawl and can acknowledge entries and store the page
// states their fetches produced in one transaction: after a crash either
// both are stored or neither, so an entry fetched again after a crash is
// judged against the state its first fetch was judged against, and
// reports the same change. sqlitestore implements it with one transaction;
// redisstore with one script on one server, and on a partitioned frontier
// (a cluster) as an acknowledgement followed by the states, which no
// transaction spans. Without it a queue run acknowledges first and stores
// the states after. Implementations must be safe for concurrent use.
type PageAcker interface {
	// AckPages acknowledges the entries of ids, as Queue.Ack does, and
	// stores the Page of each element of pages whose Lease it
	// acknowledged; a page whose lease is not in ids, or is no longer
	// held, is not stored. Leases no longer held are reported as Ack
	// reports them (ErrUnknownLease); the rest are acknowledged all the
	// same.
	AckPages(ctx context.Context, ids []string, pages []LeasePage) error
}

// pageVersion is the first byte of an encoded PageState, with captureFlag
// set in it when a Capture follows the other fields. Version 1 had no
// Depth; it is still read (Depth 0).
const (
	pageVersion = 2
	captureFlag = 0x80
)

// MarshalBinary encodes s compactly: a version byte, varints for the
// numbers and times, eight bytes of digest, the two strings with their
// lengths, and the depth. A page with a 60-byte URL and a 20-byte ETag takes
// about 115 bytes. A Capture, when set, follows (its record ID, its URI
// unless it is the page's URL, its date and its payload digest: some 95
// bytes more), and the version byte's high bit says so. It never fails.
func (s PageState) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 48+len(s.URL)+len(s.ETag)))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (s PageState) AppendBinary(b []byte) ([]byte, error) {
	v := byte(pageVersion)
	if !s.Capture.IsZero() {
		v |= captureFlag
	}
	b = append(b, v, s.Change)
	b = binary.AppendUvarint(b, uint64(max(s.Status, 0)))
	b = binary.AppendVarint(b, millis(s.Fetched))
	b = binary.AppendVarint(b, seconds(s.LastModified))
	b = binary.AppendVarint(b, millis(s.Due))
	b = binary.AppendVarint(b, s.Interval.Milliseconds())
	b = binary.LittleEndian.AppendUint64(b, s.Digest)
	b = binary.AppendUvarint(b, uint64(len(s.URL)))
	b = append(b, s.URL...)
	b = binary.AppendUvarint(b, uint64(len(s.ETag)))
	b = append(b, s.ETag...)
	b = binary.AppendUvarint(b, uint64(max(s.Depth, 0)))
	if c := s.Capture; !c.IsZero() {
		uri := c.URI
		if uri == s.URL {
			uri = "" // most often the page's own URL: not stored twice
		}
		for _, f := range [...]string{c.RecordID, uri} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
		b = binary.AppendVarint(b, nanos(c.Date))
		b = binary.AppendUvarint(b, uint64(len(c.PayloadDigest)))
		b = append(b, c.PayloadDigest...)
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote; other bytes fail with
// an error wrapping ErrBadPageState.
func (s *PageState) UnmarshalBinary(b []byte) error {
	d := pageDecoder{b: b}
	v := d.byte()
	captured := v&captureFlag != 0
	if v &^= captureFlag; v != pageVersion && v != 1 && d.err == nil {
		return fmt.Errorf("%w: version %d", ErrBadPageState, v)
	}
	var out PageState
	out.Change = d.byte()
	out.Status = int(d.uvarint())
	out.Fetched = fromMillis(d.varint())
	if sec := d.varint(); sec != 0 {
		out.LastModified = time.Unix(sec, 0).UTC()
	}
	out.Due = fromMillis(d.varint())
	out.Interval = time.Duration(d.varint()) * time.Millisecond
	out.Digest = d.uint64()
	out.URL = d.string()
	out.ETag = d.string()
	if v >= 2 {
		out.Depth = int(d.uvarint())
	}
	if captured {
		c := &out.Capture
		c.RecordID = d.string()
		if c.URI = d.string(); c.URI == "" {
			c.URI = out.URL
		}
		if ns := d.varint(); ns != 0 {
			c.Date = time.Unix(0, ns).UTC()
		}
		c.PayloadDigest = d.string()
	}
	if d.err != nil {
		return d.err
	}
	*s = out
	return nil
}

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// millis is t in Unix milliseconds, 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func seconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// DueMillis is the Due of s in Unix milliseconds (0 when unset), the column
// or score a store orders due pages by.
func (s PageState) DueMillis() int64 { return millis(s.Due) }

// pageDecoder reads an encoded PageState; the first failure sticks in err.
type pageDecoder struct {
	b   []byte
	err error
}

func (d *pageDecoder) short() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", ErrBadPageState)
	}
	d.b = nil
}

func (d *pageDecoder) byte() byte {
	if len(d.b) < 1 {
		d.short()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *pageDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.short()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *pageDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.short()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *pageDecoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.short()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *pageDecoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.short()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
