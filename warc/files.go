package warc

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// openSuffix marks a file still being written: no reader opens it, and a
// crawl killed while it was open leaves it for New to recover.
const openSuffix = ".open"

// warcFile is the WARC file being written and its index lines. Owned by
// the Writer's commit loop.
type warcFile struct {
	dir, name string // name is the final name, without openSuffix
	f, idx    *os.File
	out       *bufio.Writer // gathers the members of a batch into one write
	size      int64
}

func createFile(dir, name string) (*warcFile, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path+openSuffix, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("warc: %w", err)
	}
	idx, err := os.OpenFile(cdxPath(path)+openSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path + openSuffix)
		return nil, fmt.Errorf("warc: %w", err)
	}
	return &warcFile{dir: dir, name: name, f: f, idx: idx, out: bufio.NewWriterSize(f, 256<<10)}, nil
}

// cdxPath is the index beside the WARC file at path.
func cdxPath(path string) string { return strings.TrimSuffix(path, ".warc.gz") + ".cdxj" }

// append writes the gzip members (a member larger than the buffer goes
// straight to the file), then their index lines. A failed write is cut off
// again, so the file holds whole records only.
func (w *warcFile) append(members [][]byte, lines []byte) error {
	var n int64
	var err error
	for _, m := range members {
		if _, err = w.out.Write(m); err != nil {
			break
		}
		n += int64(len(m))
	}
	if err == nil {
		err = w.out.Flush()
	}
	if err != nil {
		w.out.Reset(w.f)
		if terr := w.f.Truncate(w.size); terr == nil {
			_, _ = w.f.Seek(w.size, io.SeekStart)
		}
		return fmt.Errorf("warc: writing %s: %w", w.name, err)
	}
	w.size += n
	if len(lines) == 0 {
		return nil
	}
	if _, err := w.idx.Write(lines); err != nil {
		return fmt.Errorf("warc: writing the index of %s: %w", w.name, err)
	}
	return nil
}

// close syncs the file, renames it to its final name and writes its sorted
// CDXJ index.
func (w *warcFile) close() error {
	path := filepath.Join(w.dir, w.name)
	err := errors.Join(w.f.Sync(), w.f.Close(), w.idx.Close())
	if err != nil {
		return fmt.Errorf("warc: closing %s: %w", w.name, err)
	}
	if err := os.Rename(path+openSuffix, path); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	return finishIndex(cdxPath(path), -1)
}

// lineWithin reports whether an index line's record ends within size.
func lineWithin(line string, size int64) bool {
	_, js, ok := strings.Cut(line, " {")
	if !ok {
		return false
	}
	var v struct{ Offset, Length string }
	if json.Unmarshal([]byte("{"+js), &v) != nil {
		return false
	}
	off, err1 := strconv.ParseInt(v.Offset, 10, 64)
	n, err2 := strconv.ParseInt(v.Length, 10, 64)
	return err1 == nil && err2 == nil && off+n <= size
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// fileName matches the names a Writer gives: prefix-timestamp-serial.
var fileName = regexp.MustCompile(`^(.*)-(\d{14})-(\d{5,})\.warc\.gz(\.open)?$`)

// recoverDir creates dir if needed, recovers the files of prefix that a
// killed crawl left open, and returns the highest serial number in use.
func recoverDir(dir, prefix string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("warc: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("warc: %w", err)
	}
	serial := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".cdxj-run-") {
			// A run of an index sort a killed crawl left: the index it was
			// for is made again from the lines it came from.
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil || m[1] != prefix {
			continue
		}
		n, _ := strconv.Atoi(m[3]) // digits only
		serial = max(serial, n)
		path := filepath.Join(dir, strings.TrimSuffix(e.Name(), openSuffix))
		if m[4] != "" {
			if err := recoverFile(path); err != nil {
				return 0, err
			}
			continue
		}
		// A closed file whose index lines are still unsorted: the crawl
		// was killed while it sorted them.
		if _, err := os.Stat(cdxPath(path) + openSuffix); err == nil {
			if err := finishIndex(cdxPath(path), -1); err != nil {
				return 0, err
			}
		}
	}
	return serial, nil
}

// recoverFile cuts an open file after its last whole gzip member (one
// record each), renames it and writes the index of what it kept.
func recoverFile(path string) error {
	f, err := os.OpenFile(path+openSuffix, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	good, err := wholeMembers(f)
	if err == nil {
		err = f.Truncate(good)
	}
	err = errors.Join(err, f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRecovery, path, err)
	}
	if err := os.Rename(path+openSuffix, path); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	return finishIndex(cdxPath(path), good)
}

// countingReader counts the bytes gzip consumed: it is a flate.Reader, so
// the decompressor reads no further than a member's end.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// wholeMembers returns the length of the run of whole gzip members at the
// start of r.
func wholeMembers(r io.Reader) (int64, error) {
	cr := &countingReader{r: bufio.NewReader(r)}
	var good int64
	zr, err := gzip.NewReader(cr)
	for err == nil {
		zr.Multistream(false)
		if _, err = io.Copy(io.Discard, zr); err != nil {
			break
		}
		good = cr.n
		err = zr.Reset(cr)
	}
	return good, nil
}

// cdxLine is one line of a CDXJ index (pywb's format).
type cdxLine struct {
	target string
	date   time.Time
	mime   string
	status int
	digest [20]byte // the payload's SHA-1; zero: none
	// method is the request's method; a request other than a GET is keyed
	// with key's parameters in its query and ends its line with the
	// method and key.body (requestBody), as warcio indexes it.
	method string
	key    methodKey
	// head is the line up to the record's place in the file, and tail
	// what follows it, built by the worker that archives it (see
	// appendHead).
	head, tail []byte
}

// appendHead appends the part of l's line that does not depend on where
// the record lands: key, date, URL, media type, status and digest.
func (l *cdxLine) appendHead(b []byte) []byte {
	b = append(b, surt(l.target, l.key.params...)...)
	b = append(b, ' ')
	b = l.date.AppendFormat(b, "20060102150405")
	b = append(b, ` {"url":`...)
	b = appendJSONString(b, l.target)
	b = append(b, `,"mime":`...)
	b = appendJSONString(b, l.mime)
	b = append(b, `,"status":"`...)
	b = strconv.AppendInt(b, int64(l.status), 10)
	b = append(b, '"')
	if l.digest != ([20]byte{}) {
		b = append(b, `,"digest":"`...)
		b = append(b, sha1Label(l.digest)[len("sha1:"):]...)
		b = append(b, '"')
	}
	return b
}

// appendMethod appends what ends the line of a request other than a GET:
// its method and body query, as warcio's lines end.
func (l *cdxLine) appendMethod(b []byte) []byte {
	if l.method == "" || l.method == "GET" {
		return b
	}
	b = appendJSONField(b, "method", l.method)
	if l.key.body != "" {
		b = appendJSONField(b, "requestBody", l.key.body)
	}
	return b
}

// appendTail ends a line whose head is written: where its record lies,
// then tail (appendMethod's).
func appendTail(b []byte, offset, length int64, filename string, tail []byte) []byte {
	b = append(b, `,"length":"`...)
	b = strconv.AppendInt(b, length, 10)
	b = append(b, `","offset":"`...)
	b = strconv.AppendInt(b, offset, 10)
	b = append(b, `","filename":`...)
	b = appendJSONString(b, filename)
	b = append(b, tail...)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string in JSON.stringify's form,
// which warcio and pywb write: only quotes, backslashes and control
// characters escaped ("&", "<", ">" as they are), invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, "\ufffd"...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// surt is the Sort-friendly URI Reordering Transform of u as pywb keys its
// indexes: host labels reversed and joined by commas without "www", the
// port unless the scheme's default, then ")" and the path and sorted query,
// all lower case. extra are parameters added to the query (a request's
// method and body, see keyForMethod), in their final form.
func surt(u string, extra ...string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return strings.ToLower(u)
	}
	host := strings.TrimSuffix(strings.ToLower(p.Hostname()), ".")
	labels := strings.Split(host, ".")
	if len(labels) > 2 && labels[0] == "www" {
		labels = labels[1:]
	}
	slices.Reverse(labels)
	var b strings.Builder
	b.WriteString(strings.Join(labels, ","))
	if port := p.Port(); port != "" && !(p.Scheme == "http" && port == "80") && !(p.Scheme == "https" && port == "443") {
		b.WriteString(":" + port)
	}
	b.WriteString(")")
	path := p.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(strings.ToLower(path))
	var q []string
	if p.RawQuery != "" {
		// Lower case before sorting, as pywb and warcio sort.
		q = strings.Split(strings.ToLower(p.RawQuery), "&")
	}
	q = append(q, extra...)
	if len(q) > 0 {
		slices.Sort(q)
		b.WriteString("?" + strings.Join(q, "&"))
	}
	return b.String()
}
