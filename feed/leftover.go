package feed

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// leftover is a temporary file of a dead exporter, locked by this process.
type leftover struct {
	f    *os.File
	path string
	mod  time.Time
	scan scanResult
}

// scanResult describes a leftover's complete items.
type scanResult struct {
	end    int64 // offset just after the last complete item; 0 if none
	size   int64
	items  int
	header []string // CSV, when items > 0
}

// leftovers finds, locks and scans the dead exporters' temporary files
// beside target, the first part's file with symbolic links followed. Files
// without a complete item are removed. Without Resume, any other leftover is
// refused with ErrLeftover.
func (e *Exporter) leftovers(target string) ([]*leftover, error) {
	dir := filepath.Dir(target)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var found []*leftover
	fail := func(err error) ([]*leftover, error) {
		for _, l := range found {
			l.f.Close()
		}
		return nil, err
	}
	for _, de := range entries {
		name := de.Name()
		if e.staleCopy(dir, de, target) {
			continue
		}
		i := strings.LastIndex(name, tmpMarker)
		if !strings.HasPrefix(name, ".") || i < 1 || !de.Type().IsRegular() ||
			name[1:i] != filepath.Base(target) && !e.isPartBase(name[1:i]) {
			continue
		}
		l, err := lockLeftover(filepath.Join(dir, name))
		if err != nil {
			return fail(err)
		}
		if l == nil {
			continue
		}
		if l.scan, err = e.scan(l.f, nil); err != nil {
			l.f.Close()
			return fail(fmt.Errorf("feed: reading leftover %s: %w", l.path, err))
		}
		if l.scan.items == 0 {
			e.log.Warn("feed: removed a leftover without a complete item", "file", l.path, "bytes", l.scan.size)
			err := os.Remove(l.path)
			l.f.Close()
			if err != nil {
				return fail(err)
			}
			continue
		}
		found = append(found, l)
	}
	slices.SortFunc(found, func(a, b *leftover) int { return a.mod.Compare(b.mod) })
	if len(found) == 0 || e.opts.resume {
		return found, nil
	}
	var desc []string
	for _, l := range found {
		d := fmt.Sprintf("%s holds %d items", l.path, l.scan.items)
		if torn := l.scan.size - l.scan.end; torn > 0 {
			d += fmt.Sprintf(" and %d bytes of a torn one", torn)
		}
		desc = append(desc, d)
	}
	return fail(fmt.Errorf("%w: %s (an exporter to %s did not reach Close); pass feed.Resume() to adopt them, or remove them",
		ErrLeftover, strings.Join(desc, "; "), e.path))
}

// lockLeftover opens and locks a temporary file; nil if a live exporter
// holds it or it went away (renamed into place by its finishing exporter).
func lockLeftover(path string) (*leftover, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		return nil, err
	}
	// Its exporter may have renamed it into place between our open and
	// our lock; then this name no longer leads to the file we hold.
	held, err1 := f.Stat()
	named, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		f.Close()
		return nil, nil
	}
	return &leftover{f: f, path: path, mod: held.ModTime()}, nil
}

// copyItems writes the complete items of leftover l into p, in p's format.
func (e *Exporter) copyItems(p *part, l *leftover) (int, error) {
	n := 0
	_, err := e.scan(l.f, func(raw []byte, header, row []string) error {
		n++
		if e.format != CSV {
			return e.emit(p, e.encodeValue(p, raw), nil)
		}
		cells := make(map[string]string, len(header))
		for i, k := range header {
			if i < len(row) {
				cells[k] = row[i]
			}
		}
		return e.writeRow(p, header, cells)
	})
	if err != nil {
		return 0, fmt.Errorf("feed: adopting leftover %s: %w", l.path, err)
	}
	return n, nil
}

// scan reads a temporary file's complete items: each is a whole line (JSON
// Lines), a whole element (JSON array; the last one, which no newline ends,
// when it parses) or a whole record (CSV, after the header). A torn last
// item, from a write the process did not live to finish, is not counted.
// fn, if not nil, gets each item: the JSON text, or the CSV header and row.
func (e *Exporter) scan(f *os.File, fn func(raw []byte, header, row []string) error) (scanResult, error) {
	fi, err := f.Stat()
	if err != nil {
		return scanResult{}, err
	}
	r := io.NewSectionReader(f, 0, fi.Size())
	res := scanResult{size: fi.Size()}
	switch e.format {
	case CSV:
		err = scanCSV(r, &res, fn)
	case JSON:
		err = scanJSON(r, &res, fn)
	default:
		err = scanLines(r, &res, fn)
	}
	if res.items == 0 {
		res.end, res.header = 0, nil
	}
	return res, err
}

func scanLines(r io.Reader, res *scanResult, fn func(raw []byte, header, row []string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return nil // a torn last line, or none
		}
		if err != nil {
			return err
		}
		off += int64(len(line))
		body := line[:len(line)-1]
		if !json.Valid(body) {
			return nil
		}
		if fn != nil {
			if err := fn(body, nil, nil); err != nil {
				return err
			}
		}
		res.items++
		res.end = off
	}
}

func scanJSON(r io.Reader, res *scanResult, fn func(raw []byte, header, row []string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := br.ReadBytes('\n')
	if err != nil || string(first) != "[\n" {
		return nil
	}
	off := int64(len(first))
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return err
		}
		start := off
		off += int64(len(line))
		body := bytes.TrimSuffix(line, []byte("\n"))
		item := bytes.TrimSuffix(body, []byte(","))
		if string(body) == "]" || !json.Valid(item) {
			return nil
		}
		if fn != nil {
			if err := fn(item, nil, nil); err != nil {
				return err
			}
		}
		res.items++
		res.end = start + int64(len(item))
		if err == io.EOF {
			return nil
		}
	}
}

func scanCSV(r *io.SectionReader, res *scanResult, fn func(raw []byte, header, row []string) error) error {
	if res.size == 0 {
		return nil
	}
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, res.size-1); err != nil {
		return err
	}
	// csv.Writer ends every record with a newline: a record read up to
	// the end of a file that does not end with one is torn.
	complete := func(off int64) bool { return off < res.size || last[0] == '\n' }
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil || !complete(cr.InputOffset()) {
		return nil
	}
	for {
		row, err := cr.Read()
		if err != nil || !complete(cr.InputOffset()) {
			return nil
		}
		if fn != nil {
			if err := fn(nil, header, row); err != nil {
				return err
			}
		}
		res.items++
		res.end = cr.InputOffset()
		res.header = header
	}
}

// staleCopy removes de when it is the unfinished copy of a dead exporter's
// Append (see copyMarker) to target, and reports whether it was such a
// file. A live exporter's copy is locked and left alone.
func (e *Exporter) staleCopy(dir string, de fs.DirEntry, target string) bool {
	name := de.Name()
	i := strings.LastIndex(name, copyMarker)
	if !strings.HasPrefix(name, ".") || i < 1 || !de.Type().IsRegular() || name[1:i] != filepath.Base(target) {
		return false
	}
	l, err := lockLeftover(filepath.Join(dir, name))
	if err != nil || l == nil {
		return true
	}
	defer l.f.Close()
	if err := os.Remove(l.path); err == nil {
		e.log.Warn("feed: removed the unfinished copy of a killed Append", "file", l.path)
	}
	return true
}
