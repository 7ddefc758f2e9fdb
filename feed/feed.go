// Package feed exports scraped items as JSON Lines, CSV or a JSON array, to
// any io.Writer or to files (written through a temporary file and renamed
// into place on Close, optionally rotated by item count or size).
//
// An Exporter's Processor plugs it into a Collector's item pipeline:
//
//	exp, err := feed.Create("items.csv")
//	...
//	c.Pipeline(validate, dedupe, exp.Processor())
//	c.Visit(...)
//	err = exp.Close()
//
// Structs are exported by their json tags (what encoding/json writes),
// maps as they are (keys sorted, as encoding/json sorts them). In CSV, the
// header is the first item's fields (or the columns given with Columns), and
// a field that is not a string or a number is written as its JSON text. An
// Exporter is safe for concurrent use; the caller must Close it.
package feed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/magpiecrawl/magpie"
)

// Format is an export format.
type Format int

const (
	// JSONLines writes one JSON value per line.
	JSONLines Format = iota
	// CSV writes a header row and one row per item.
	CSV
	// JSON writes one JSON array of the items.
	JSON
)

// ErrUnknownFormat is returned by Create for a file name whose extension is
// not .jsonl, .csv or .json.
var ErrUnknownFormat = errors.New("feed: unknown format")

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("feed: exporter closed")

// FormatOf returns the format a file name's extension names: .jsonl (or
// .ndjson), .csv, .json.
func FormatOf(name string) (Format, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jsonl", ".ndjson":
		return JSONLines, nil
	case ".csv":
		return CSV, nil
	case ".json":
		return JSON, nil
	}
	return 0, fmt.Errorf("%w: %q (want .jsonl, .csv or .json)", ErrUnknownFormat, name)
}

// Option configures an Exporter.
type Option func(*options)

type options struct {
	columns     []string
	appendLines bool
	maxItems    int
	maxBytes    int64
}

// Columns fixes the CSV header and the fields exported, in this order;
// fields an item lacks are left empty.
func Columns(names ...string) Option {
	return func(o *options) { o.columns = append([]string(nil), names...) }
}

// Append makes a JSON Lines file exporter append to an existing file instead
// of replacing it; each line is written with a single write call, so lines
// of processes appending to one file do not interleave. Other formats
// ignore it.
func Append() Option { return func(o *options) { o.appendLines = true } }

// Rotate starts a new file after maxItems items or maxBytes bytes (0: no
// limit on that count). The file name given to Create is a template: "{n}"
// in it is the part number, from 1; without "{n}", "-N" is added before the
// extension of every part. Writer exporters ignore it.
func Rotate(maxItems int, maxBytes int64) Option {
	return func(o *options) { o.maxItems, o.maxBytes = maxItems, maxBytes }
}

// Exporter writes items in one format.
type Exporter struct {
	format Format
	opts   options

	// mu guards everything below.
	mu      sync.Mutex
	out     *part
	closed  bool
	path    string // file template, "" for a writer exporter
	partNo  int
	written []string // files completed so far
}

// part is one output: a writer, and for files the temporary file behind it.
type part struct {
	w        *countingWriter
	bw       *bufio.Writer
	csv      *csv.Writer
	header   []string
	items    int
	file     *os.File
	tmp      string // temporary name, renamed to final on close
	final    string
	appended bool
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// New returns an exporter writing to w, which the caller keeps (Close
// flushes but does not close w).
func New(w io.Writer, format Format, opts ...Option) *Exporter {
	e := &Exporter{format: format}
	for _, o := range opts {
		o(&e.opts)
	}
	e.out = e.newPart(w)
	return e
}

// Create returns an exporter writing to the file name, in the format its
// extension names. The file appears (or is replaced) on Close; until then
// the items are in a temporary file beside it.
func Create(name string, opts ...Option) (*Exporter, error) {
	format, err := FormatOf(strings.ReplaceAll(name, "{n}", "1"))
	if err != nil {
		return nil, err
	}
	e := &Exporter{format: format, path: name}
	for _, o := range opts {
		o(&e.opts)
	}
	if err := e.openFile(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Exporter) newPart(w io.Writer) *part {
	cw := &countingWriter{w: w}
	p := &part{w: cw, bw: bufio.NewWriter(cw)}
	if e.format == CSV {
		p.csv = csv.NewWriter(p.bw)
		p.header = e.opts.columns
	}
	return p
}

// partName is the file name of part n.
func (e *Exporter) partName(n int) string {
	if strings.Contains(e.path, "{n}") {
		return strings.ReplaceAll(e.path, "{n}", strconv.Itoa(n))
	}
	if e.opts.maxItems <= 0 && e.opts.maxBytes <= 0 {
		return e.path
	}
	ext := filepath.Ext(e.path)
	return strings.TrimSuffix(e.path, ext) + "-" + strconv.Itoa(n) + ext
}

// openFile starts the next file part.
func (e *Exporter) openFile() error {
	e.partNo++
	final := e.partName(e.partNo)
	if e.format == JSONLines && e.opts.appendLines {
		f, err := os.OpenFile(final, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		p := e.newPart(f)
		p.file, p.final, p.appended = f, final, true
		e.out = p
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return err
	}
	p := e.newPart(f)
	p.file, p.tmp, p.final = f, f.Name(), final
	e.out = p
	return nil
}

// Write exports v.
func (e *Exporter) Write(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("feed: encoding item: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if e.path != "" && e.out.items > 0 &&
		((e.opts.maxItems > 0 && e.out.items >= e.opts.maxItems) ||
			(e.opts.maxBytes > 0 && e.out.w.n+int64(e.out.bw.Buffered()) >= e.opts.maxBytes)) {
		if err := e.finishPart(); err != nil {
			return err
		}
		if err := e.openFile(); err != nil {
			return err
		}
	}
	p := e.out
	switch e.format {
	case JSONLines:
		line := append(data, '\n')
		if p.appended {
			// One write per line: concurrent appenders never interleave.
			if err := p.bw.Flush(); err != nil {
				return err
			}
			_, err = p.w.Write(line)
		} else {
			_, err = p.bw.Write(line)
		}
	case JSON:
		sep := ",\n"
		if p.items == 0 {
			sep = "[\n"
		}
		if _, err = p.bw.WriteString(sep); err == nil {
			_, err = p.bw.Write(data)
		}
	case CSV:
		err = e.writeCSV(p, data)
	}
	if err != nil {
		return err
	}
	p.items++
	return nil
}

// writeCSV writes one row (and the header before the first).
func (e *Exporter) writeCSV(p *part, data []byte) error {
	keys, values, err := fields(data)
	if err != nil {
		return err
	}
	if p.header == nil {
		p.header = keys
	}
	if p.items == 0 {
		if err := p.csv.Write(p.header); err != nil {
			return err
		}
	}
	row := make([]string, len(p.header))
	for i, k := range p.header {
		row[i] = cell(values[k])
	}
	p.csv.Write(row)
	p.csv.Flush()
	return p.csv.Error()
}

// fields reads a JSON object's keys in order and their raw values; a value
// that is not an object is one field named "value".
func fields(data []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return []string{"value"}, map[string]json.RawMessage{"value": data}, nil
	}
	var keys []string
	values := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		if _, dup := values[k]; !dup {
			keys = append(keys, k)
		}
		values[k] = raw
	}
	return keys, values, nil
}

// cell writes a JSON value as a CSV cell: strings unquoted, null empty,
// everything else as its JSON text.
func cell(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// finishPart completes the current output: closes the JSON array, flushes,
// and for files syncs, closes and renames the temporary file into place.
func (e *Exporter) finishPart() error {
	p := e.out
	var err error
	if e.format == JSON {
		end := "]\n"
		if p.items == 0 {
			end = "[]\n"
		} else {
			end = "\n]\n"
		}
		_, err = p.bw.WriteString(end)
	}
	err = errors.Join(err, p.bw.Flush())
	if p.file == nil {
		return err
	}
	err = errors.Join(err, p.file.Sync(), p.file.Close())
	if p.tmp != "" {
		if err != nil {
			_ = os.Remove(p.tmp)
			return err
		}
		if rerr := os.Rename(p.tmp, p.final); rerr != nil {
			_ = os.Remove(p.tmp)
			return rerr
		}
	}
	if err == nil {
		e.written = append(e.written, p.final)
	}
	return err
}

// Close finishes the export: the JSON array is closed, everything is
// flushed, and files are renamed into place. Calling it again does nothing.
func (e *Exporter) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.finishPart()
}

// Files returns the files written and completed so far (rotated parts, and
// all of them after Close).
func (e *Exporter) Files() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.written...)
}

// Processor returns an item processor that exports each item's Value, for
// Collector.Pipeline.
func (e *Exporter) Processor() magpie.ItemProcessor {
	return func(_ context.Context, it *magpie.Item) error {
		return e.Write(it.Value)
	}
}
