package feed

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// partKind is where a part's bytes go.
type partKind int

const (
	toWriter partKind = iota // the caller's io.Writer (New)
	toTemp                   // a temporary file renamed over final on Close
	toAppend                 // the final file, opened for appending
	toDirect                 // a FIFO or device, written in place
)

// tmpMarker separates a destination's base name from the random suffix of
// its temporary files: ".items.jsonl.tmp-k3x9".
const tmpMarker = ".tmp-"

// part is one output: a writer, and for files the file behind it.
type part struct {
	kind   partKind
	w      io.Writer
	file   *os.File // nil for toWriter
	tmp    string   // toTemp: the temporary file's name
	final  string   // the destination's name
	target string   // the destination with symbolic links followed
	// start is the file's size when this exporter began writing to it
	// (after adopting leftovers): Abort truncates back to it.
	start int64
	// adopted marks a temporary file taken over from a dead exporter:
	// Abort leaves it for the next Resume instead of removing it.
	adopted bool
	// perm is the mode a replaced destination had (0: a new file, whose
	// mode the umask decided when the temporary file was created).
	perm  fs.FileMode
	items int
	bytes int64 // in this part, for Rotate
	// tail counts the bytes written after start.
	tail   int64
	header []string // CSV
}

func (p *part) name() string {
	if p.kind == toWriter {
		return "the writer"
	}
	return p.final
}

// takeBack removes the last n bytes written, after a write that failed part
// way.
func (p *part) takeBack(n int64) error {
	if p.kind != toTemp && p.kind != toAppend {
		return errors.New("a stream cannot be rewound")
	}
	fi, err := p.file.Stat()
	if err != nil {
		return err
	}
	// The file is open for appending, so its end is where the failed write
	// went (other appenders write whole lines in one call each).
	return p.file.Truncate(fi.Size() - n)
}

// finish completes the part after err (the closing write's error): files
// are synced and closed, a temporary file renamed into place. A temporary
// file that cannot be finished is kept for Resume.
func (p *part) finish(err error, durable bool) error {
	switch p.kind {
	case toWriter:
		return err
	case toDirect:
		return errors.Join(err, p.file.Close())
	case toAppend:
		return errors.Join(err, p.file.Sync(), p.file.Close())
	}
	if err == nil {
		err = p.file.Sync()
	}
	if err == nil && p.perm != 0 {
		err = p.file.Chmod(p.perm)
	}
	if err == nil {
		// Renamed before the file is closed, so that its lock keeps a
		// concurrent Create from adopting it in between.
		err = os.Rename(p.tmp, p.target)
	}
	if err == nil && durable {
		err = syncDir(filepath.Dir(p.target))
	}
	cerr := p.file.Close()
	if err != nil {
		return fmt.Errorf("feed: finishing %s: %w (its items stay in %s; Create with Resume adopts them)", p.final, err, p.tmp)
	}
	return cerr
}

// abort discards what the part wrote (see Exporter.Abort).
func (p *part) abort() error {
	switch p.kind {
	case toWriter:
		if p.items > 0 {
			return fmt.Errorf("%w: %d items went to the writer", ErrNotDiscarded, p.items)
		}
		return nil
	case toDirect:
		cerr := p.file.Close()
		if p.items > 0 {
			return errors.Join(fmt.Errorf("%w: %d items went to %s", ErrNotDiscarded, p.items, p.final), cerr)
		}
		return cerr
	case toAppend:
		defer p.file.Close()
		fi, err := p.file.Stat()
		if err != nil {
			return err
		}
		if fi.Size() != p.start+p.tail {
			return fmt.Errorf("%w: other writers appended to %s after this exporter's %d lines", ErrNotDiscarded, p.final, p.items)
		}
		return p.file.Truncate(p.start)
	}
	if p.adopted {
		err := p.file.Truncate(p.start)
		return errors.Join(err, p.file.Close())
	}
	return errors.Join(os.Remove(p.tmp), p.file.Close())
}

// openFile starts the next file part; first is true for the one Create
// opens, which deals with leftovers.
func (e *Exporter) openFile(first bool) error {
	e.partNo++
	final := e.partName(e.partNo)
	target, fi, direct, err := resolve(final)
	if err != nil {
		return err
	}
	if direct {
		// No O_CREATE or O_TRUNC: a FIFO or device is written as it is.
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		e.out = &part{kind: toDirect, w: f, file: f, final: final, target: target}
		return nil
	}
	var left []*leftover
	if first {
		if left, err = e.leftovers(target); err != nil {
			return err
		}
	}
	p, err := e.openRegular(final, target, fi, left)
	if err != nil {
		for _, l := range left {
			l.f.Close()
		}
		return err
	}
	e.out = p
	return nil
}

// openRegular opens the part for a regular (or new) destination, adopting
// the leftovers given (all locked by this process), which it closes.
func (e *Exporter) openRegular(final, target string, fi fs.FileInfo, left []*leftover) (*part, error) {
	p := &part{final: final, target: target}
	if e.format == JSONLines && e.opts.appendLines {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
		if err != nil {
			return nil, err
		}
		p.kind, p.file, p.w = toAppend, f, f
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		p.start = fi.Size()
		if e.opts.durable {
			if err := syncDir(filepath.Dir(target)); err != nil {
				f.Close()
				return nil, err
			}
		}
	} else if len(left) > 0 {
		// Go on writing in the first leftover, after its last complete item.
		l := left[0]
		left = left[1:]
		if err := l.f.Truncate(l.scan.end); err != nil {
			return nil, err
		}
		p.kind, p.file, p.w, p.tmp, p.adopted = toTemp, l.f, l.f, l.path, true
		p.start = l.scan.end
		p.items, p.header = l.scan.items, l.scan.header
		e.adopted += l.scan.items
		e.log.Warn("feed: adopted the items of an unfinished export", "file", l.path, "items", l.scan.items,
			"discarded_bytes", l.scan.size-l.scan.end, "dest", final)
	} else if e.opts.appendLines && fi != nil && !e.rotating() {
		if err := e.carryOver(p, target); err != nil {
			return nil, err
		}
	} else {
		f, err := createTemp(target, tmpMarker, e.opts.durable)
		if err != nil {
			return nil, err
		}
		p.kind, p.file, p.w, p.tmp = toTemp, f, f, f.Name()
	}
	if fi != nil {
		p.perm = fi.Mode().Perm()
	}
	if e.format == CSV && len(p.header) > 0 && e.opts.columns != nil && !slices.Equal(p.header, e.opts.columns) {
		p.abort()
		return nil, fmt.Errorf("%w: %s has the CSV header %q, Columns wants %q", ErrLeftover, p.tmp, p.header, e.opts.columns)
	}
	// Items of further leftovers are copied in; each is removed once its
	// items are written here.
	for _, l := range left {
		n, err := e.copyItems(p, l)
		if err != nil {
			p.abort()
			return nil, err
		}
		e.adopted += n
		e.log.Warn("feed: adopted the items of an unfinished export", "file", l.path, "items", n,
			"discarded_bytes", l.scan.size-l.scan.end, "dest", final)
		if err := os.Remove(l.path); err != nil {
			p.abort()
			return nil, err
		}
		l.f.Close()
	}
	fi2, err := p.file.Stat()
	if err != nil {
		p.abort()
		return nil, err
	}
	p.start, p.tail = fi2.Size(), 0
	if p.kind == toTemp {
		p.bytes = p.start
	}
	return p, nil
}

// resolve follows symbolic links from name to the file to write, and
// reports its info (nil if it does not exist) and whether it must be written
// in place: not a regular file, or a descriptor under /proc/ (where
// /dev/stdout and /dev/fd/N lead), which is never replaced.
func resolve(name string) (target string, fi fs.FileInfo, direct bool, err error) {
	target = name
	for range 40 {
		if underProc(target) {
			return target, nil, true, nil
		}
		fi, err = os.Lstat(target)
		if errors.Is(err, fs.ErrNotExist) {
			return target, nil, false, nil
		}
		if err != nil {
			return "", nil, false, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			break
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", nil, false, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", nil, false, &fs.PathError{Op: "create", Path: name, Err: errors.New("too many symbolic links")}
	case fi.IsDir():
		return "", nil, false, &fs.PathError{Op: "create", Path: name, Err: errors.New("is a directory")}
	case !fi.Mode().IsRegular():
		return target, fi, true, nil
	}
	return target, fi, false, nil
}

// underProc reports whether name is in /proc/ once the symbolic links of
// its directory are followed, as /proc/self/fd/1 and /dev/fd/1 are: such a
// name stands for a descriptor, whatever file it leads to.
func underProc(name string) bool {
	abs, err := filepath.Abs(name)
	if err != nil {
		return false
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		dir = filepath.Dir(abs)
	}
	return dir == "/proc" || strings.HasPrefix(dir, "/proc/")
}

// createTemp creates and locks a new temporary file beside target, open
// for appending, with the mode os.Create would give (0666 less the umask).
// Its name is ".BASE" + marker + a random suffix.
func createTemp(target, marker string, durable bool) (*os.File, error) {
	dir, base := filepath.Split(target)
	for range 1000 {
		name := filepath.Join(dir, "."+base+marker+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			os.Remove(name)
			return nil, err
		}
		if !ok {
			// A Create scanning for leftovers took it between our create
			// and lock; it is empty, and that Create removes it.
			f.Close()
			continue
		}
		if durable {
			if err := syncDir(filepath.Dir(name)); err != nil {
				f.Close()
				os.Remove(name)
				return nil, err
			}
		}
		return f, nil
	}
	return nil, fmt.Errorf("feed: no free temporary name beside %s", target)
}

// syncDir fsyncs a directory, so that a file created or renamed in it stays
// after a crash of the machine.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// copyMarker names a temporary file while Append copies the existing CSV or
// JSON destination into it: a process killed part way leaves one that holds
// only some of the old items, which must never be adopted in place of the
// destination. Only a complete copy is renamed to the leftover pattern.
const copyMarker = ".copy-"

// carryOver starts part p as a temporary file holding the complete items of
// the existing destination target (Append for CSV and JSON).
func (e *Exporter) carryOver(p *part, target string) error {
	src, err := os.Open(target)
	if err != nil {
		return err
	}
	defer src.Close()
	old := &leftover{f: src, path: target}
	if old.scan, err = e.scan(src, nil); err != nil {
		return fmt.Errorf("feed: reading %s: %w", target, err)
	}
	if err := e.appendable(old); err != nil {
		return err
	}
	f, err := createTemp(target, copyMarker, e.opts.durable)
	if err != nil {
		return err
	}
	p.kind, p.file, p.w, p.tmp = toTemp, f, f, f.Name()
	if old.scan.items > 0 {
		if _, err := e.copyItems(p, old); err != nil {
			p.abort()
			return err
		}
	}
	dir, base := filepath.Split(p.tmp)
	tmp := filepath.Join(dir, strings.Replace(base, copyMarker, tmpMarker, 1))
	if err := os.Rename(p.tmp, tmp); err != nil {
		p.abort()
		return err
	}
	p.tmp = tmp
	if e.opts.durable {
		if err := syncDir(filepath.Dir(tmp)); err != nil {
			p.abort()
			return err
		}
	}
	return nil
}

// appendable checks that the scanned destination old is a complete export
// in e's format, so that carrying its items over loses nothing.
func (e *Exporter) appendable(old *leftover) error {
	rest := old.scan.size - old.scan.end
	complete := rest == 0
	if e.format == JSON && rest > 0 && rest <= 8 {
		tail := make([]byte, rest)
		if _, err := old.f.ReadAt(tail, old.scan.end); err != nil {
			return err
		}
		closing := strings.TrimSpace(string(tail))
		complete = closing == "]" && old.scan.items > 0 || closing == "[]" && old.scan.items == 0
	}
	if e.format == CSV && rest > 0 && old.scan.items == 0 {
		complete = headerOnly(io.NewSectionReader(old.f, 0, old.scan.size))
	}
	if !complete {
		return fmt.Errorf("%w: %s holds %d bytes after its last complete item (%d items)", ErrNotAppendable, old.path, rest, old.scan.items)
	}
	if e.format == CSV && old.scan.items > 0 && e.opts.columns != nil && !slices.Equal(old.scan.header, e.opts.columns) {
		return fmt.Errorf("%w: %s has the CSV header %q, Columns wants %q", ErrNotAppendable, old.path, old.scan.header, e.opts.columns)
	}
	return nil
}

// headerOnly reports whether r is one CSV record ending in a newline: the
// header of an export without items.
func headerOnly(r io.Reader) bool {
	data, err := io.ReadAll(r)
	if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
		return false
	}
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	return err == nil && len(records) == 1
}
