// Package feed exports scraped items as JSON Lines, CSV or a JSON array, to
// any io.Writer or to files (written through a temporary file and renamed
// into place on Close, or appended to, optionally rotated by item count or
// size).
//
// An Exporter's Processor plugs it into a Collector's item pipeline:
//
//	exp, err := feed.Create("items.csv")
//	...
//	c.Pipeline(validate, dedupe, exp.Processor())
//	if err := c.Visit(...); err != nil {
//		exp.Abort() // the existing items.csv stays as it was
//		...
//	}
//	err = exp.Close()
//
// Structs are exported by their json tags (what encoding/json writes),
// maps as they are (keys sorted, as encoding/json sorts them). An Exporter
// is safe for concurrent use; the caller must Close it (or Abort it).
//
// # CSV
//
// The header is the first item's fields, or the columns given with Columns.
// A field that is not a string or a number is written as its JSON text. A
// later item's field that the first item lacked (an omitempty field that was
// empty there) is not in the header: its value is dropped, the Logger hears
// of it once per field, DroppedFields counts it, and Close returns
// ErrDroppedFields after completing the file. With Columns the header is a
// choice and other fields are left out without a report.
//
// A cell that starts with '=', '+', '-', '@', a tab or a carriage return is
// written with a leading single quote, so that a spreadsheet opening the
// file shows it as text instead of running it as a formula (OWASP's advice
// against CSV injection); cells that are plain numbers, such as -3.5, are
// left alone. AllowFormulas turns this off.
//
// # Destinations
//
// Create writes a regular file (or a new one) through a temporary file
// beside it, renamed over it by Close: until then readers see the old file,
// and Abort leaves it exactly as it was. The new file's mode is 0666 less
// the umask, as os.Create's; a file replaced keeps its mode. A symbolic link
// is followed and its target replaced. A destination that is not a regular
// file (a FIFO, a device such as /dev/null) or that names a descriptor
// (/dev/stdout, /dev/fd/N, /proc/self/fd/N, whatever they lead to) is
// written to directly, appending, and never replaced; opening a FIFO waits
// for a reader, as a shell redirection does. WithFormat names the format
// for such names.
//
// # Crash safety
//
// Every Write hands its item to the operating system in one write call
// before it returns; nothing is buffered in the process. In a queue run a
// page is acknowledged only after its items passed the pipelines, so once a
// page is acknowledged its items are in the file, and a kill -9 of the
// process cannot take them back (an item whose Write failed is reported to
// OnError as a failed item instead). Durable adds an fsync per item (and of the
// directory where it matters), for a machine that may lose power or crash.
// A page that was in flight at a crash is crawled again by the next run and
// its items written again: an export is at-least-once, and a crash may leave
// duplicates, never gaps.
//
// Which mode survives a crash:
//
//   - Append (JSON Lines): lines go straight into the destination, so a
//     killed run leaves nothing to recover and the next run appends. This is
//     the mode for a resumable crawl (a queue on SQLite or Redis), and the
//     only one where several processes can write one file. Append to a CSV
//     or JSON file carries its items into the temporary file first (see
//     Append), so it resumes as Create does, below.
//   - Create without Append: the items of a killed run are in its temporary
//     file (".NAME.tmp-*"), which no rename will move into place. The next
//     Create for the same destination finds such leftovers (those no live
//     exporter holds locked) and refuses with ErrLeftover naming them, unless
//     given Resume: then it carries their complete items over into the new
//     export (a torn last item, never acknowledged, is dropped) and the
//     Logger hears what was adopted (Adopted counts the items). A resumed
//     crawl must therefore pass Resume; a fresh one refuses to mix in a dead
//     run's items silently.
//
// A write that fails part way (a full disk) is taken back: the file is
// truncated to the end of the last complete item and Write returns the
// error, so every line in the file parses once space returns. If it cannot
// be taken back (an io.Writer, a FIFO), Write returns ErrCorrupt from then
// on. Close reports how many Writes failed (ErrItemsNotWritten), so that a
// caller that checks only Close learns that items are missing.
package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	// JSON writes one JSON array of the items, one item per line.
	JSON
)

// FormatOf returns the format a file name's extension names: .jsonl (or
// .ndjson, or Scrapy's .jl), .csv, .json.
func FormatOf(name string) (Format, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jsonl", ".ndjson", ".jl":
		return JSONLines, nil
	case ".csv":
		return CSV, nil
	case ".json":
		return JSON, nil
	}
	return 0, fmt.Errorf("%w: %q (want .jsonl, .csv or .json, or the WithFormat option)", ErrUnknownFormat, name)
}

// Option configures an Exporter.
type Option func(*options)

type options struct {
	columns       []string
	appendLines   bool
	maxItems      int
	maxBytes      int64
	format        *Format
	resume        bool
	durable       bool
	allowFormulas bool
	logger        *slog.Logger
}

// Columns fixes the CSV header and the fields exported, in this order;
// fields an item lacks are left empty, fields not named are left out.
func Columns(names ...string) Option {
	return func(o *options) { o.columns = append([]string(nil), names...) }
}

// Append makes a file exporter add to an existing file instead of replacing
// it. JSON Lines are appended in place, each line with a single write call,
// so lines of processes appending to one file do not interleave: the
// crash-safe mode for resumable crawls (see the package doc). A CSV or JSON
// file cannot grow in place (a header, a closed array): its items are
// carried over into the temporary file first, and Close renames the whole
// over it, so the existing file stays as it was until then. If the process
// dies, the temporary file holds the old items and the new ones, and Create
// with Resume adopts it in place of the file. Create returns
// ErrNotAppendable when the existing file is not a complete export in the
// format. Rotated exports ignore Append unless they are JSON Lines.
func Append() Option { return func(o *options) { o.appendLines = true } }

// Rotate starts a new file after maxItems items or maxBytes bytes (0: no
// limit on that count). The file name given to Create is a template: "{n}"
// in it is the part number, from 1; without "{n}", "-N" is added before the
// extension of every part. With Resume, numbering goes on after the parts
// that exist. Writer exporters ignore it.
func Rotate(maxItems int, maxBytes int64) Option {
	return func(o *options) { o.maxItems, o.maxBytes = maxItems, maxBytes }
}

// WithFormat sets the format, whatever the file name's extension; Create
// needs it for a name without a known extension, such as /dev/stdout.
func WithFormat(f Format) Option {
	return func(o *options) { o.format = &f }
}

// Resume makes Create adopt the leftovers of an earlier exporter to the same
// destination that never reached Close (killed, crashed): their complete
// items become the first items of this export. Without it Create refuses
// leftovers with ErrLeftover. Use it for a crawl that resumes.
func Resume() Option { return func(o *options) { o.resume = true } }

// Durable makes file exporters fsync after every item (and the directory
// after a file is created or renamed), so that an item survives a power
// loss or an operating-system crash once Write returns. It costs one fsync
// per item. Without it an item survives the death of the process only.
func Durable() Option { return func(o *options) { o.durable = true } }

// AllowFormulas writes CSV cells as they are, even those that a spreadsheet
// would run as a formula (see the package doc).
func AllowFormulas() Option { return func(o *options) { o.allowFormulas = true } }

// Logger sets the logger that hears of adopted leftovers and dropped CSV
// fields (Warn). The default is silent.
func Logger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Exporter writes items in one format. The zero value is not usable: build
// one with New or Create.
type Exporter struct {
	format Format
	opts   options
	log    *slog.Logger

	// mu guards everything below.
	mu      sync.Mutex
	out     *part
	closed  bool
	path    string // file template, "" for a writer exporter
	partNo  int
	written []string // files completed so far
	broken  error    // set when a partial write could not be taken back
	dropped map[string]int
	adopted int
	// failed counts the Writes that failed; firstFailure is the first one's
	// error.
	failed       int
	firstFailure error
}

// New returns an exporter writing to w, which the caller keeps (Close
// writes the end of a JSON array but does not close w). Each item is one
// Write call on w.
func New(w io.Writer, format Format, opts ...Option) *Exporter {
	e := newExporter(opts)
	e.format = format
	e.out = &part{kind: toWriter, w: w}
	return e
}

// Create returns an exporter writing to the file name, in the format its
// extension names (or WithFormat's). A regular file appears (or is
// replaced) on Close; until then the items are in a temporary file beside
// it. See the package doc for other destinations and for leftovers of a
// crashed run (ErrLeftover, Resume).
func Create(name string, opts ...Option) (*Exporter, error) {
	e := newExporter(opts)
	e.path = name
	if e.opts.format != nil {
		e.format = *e.opts.format
	} else {
		format, err := FormatOf(strings.ReplaceAll(name, "{n}", "1"))
		if err != nil {
			return nil, err
		}
		e.format = format
	}
	if e.opts.resume && e.rotating() {
		for e.partNo = 0; ; e.partNo++ {
			if _, err := os.Lstat(e.partName(e.partNo + 1)); err != nil {
				break
			}
		}
	}
	if err := e.openFile(true); err != nil {
		return nil, err
	}
	return e, nil
}

func newExporter(opts []Option) *Exporter {
	e := &Exporter{dropped: map[string]int{}}
	for _, o := range opts {
		o(&e.opts)
	}
	e.log = e.opts.logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

func (e *Exporter) rotating() bool {
	return strings.Contains(e.path, "{n}") || e.opts.maxItems > 0 || e.opts.maxBytes > 0
}

// partName is the file name of part n.
func (e *Exporter) partName(n int) string {
	if strings.Contains(e.path, "{n}") {
		return strings.ReplaceAll(e.path, "{n}", strconv.Itoa(n))
	}
	if !e.rotating() {
		return e.path
	}
	ext := filepath.Ext(e.path)
	return strings.TrimSuffix(e.path, ext) + "-" + strconv.Itoa(n) + ext
}

// isPartBase reports whether base is the base name of a rotated part of
// this exporter's output, whatever its number.
func (e *Exporter) isPartBase(base string) bool {
	if !e.rotating() {
		return false
	}
	tmpl := filepath.Base(e.path)
	prefix, suffix, ok := strings.Cut(tmpl, "{n}")
	if !ok {
		ext := filepath.Ext(tmpl)
		prefix, suffix = strings.TrimSuffix(tmpl, ext)+"-", ext
	}
	num, ok := strings.CutPrefix(base, prefix)
	if !ok {
		return false
	}
	num, ok = strings.CutSuffix(num, suffix)
	if !ok || num == "" {
		return false
	}
	_, err := strconv.ParseUint(num, 10, 32)
	return err == nil
}

// Write exports v. When it returns nil, the item has been handed to the
// operating system (fsync'd with Durable). A Write that fails (other than
// after Close) is counted, and Close reports the count (ErrItemsNotWritten).
func (e *Exporter) Write(v any) error {
	data, err := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if err == nil {
		err = e.writeLocked(data)
	} else {
		err = fmt.Errorf("feed: encoding item: %w", err)
	}
	if err != nil {
		if e.failed == 0 {
			e.firstFailure = err
		}
		e.failed++
	}
	return err
}

// writeLocked exports one encoded item; the caller holds mu.
func (e *Exporter) writeLocked(data []byte) error {
	if e.broken != nil {
		return e.broken
	}
	if e.path != "" && e.out.items > 0 &&
		((e.opts.maxItems > 0 && e.out.items >= e.opts.maxItems) ||
			(e.opts.maxBytes > 0 && e.out.bytes >= e.opts.maxBytes)) {
		if err := e.finishPart(); err != nil {
			return err
		}
		if err := e.openFile(false); err != nil {
			return err
		}
	}
	if e.format != CSV {
		return e.emit(e.out, e.encodeValue(e.out, data), nil)
	}
	keys, values, err := fields(data)
	if err != nil {
		return fmt.Errorf("feed: reading item fields: %w", err)
	}
	cells := make(map[string]string, len(values))
	for k, raw := range values {
		cells[k] = cell(raw)
	}
	return e.writeRow(e.out, keys, cells)
}

// encodeValue is the bytes of one JSON or JSON Lines item.
func (e *Exporter) encodeValue(p *part, data []byte) []byte {
	if e.format == JSONLines {
		return append(data, '\n')
	}
	sep := ",\n"
	if p.items == 0 {
		sep = "[\n"
	}
	return append([]byte(sep), data...)
}

// emit writes one item's bytes in one write call; a write that fails part
// way is taken back, so the output ends at an item boundary. commit runs
// once the item is written.
func (e *Exporter) emit(p *part, b []byte, commit func()) error {
	n, err := p.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			if rerr := p.takeBack(int64(n)); rerr != nil {
				e.broken = fmt.Errorf("%w: %s: %w (taking it back: %v)", ErrCorrupt, p.name(), err, rerr)
				return e.broken
			}
		}
		return fmt.Errorf("feed: writing to %s: %w", p.name(), err)
	}
	if e.opts.durable && p.kind != toWriter && p.kind != toDirect {
		if err := p.file.Sync(); err != nil {
			return fmt.Errorf("feed: syncing %s: %w", p.name(), err)
		}
	}
	p.bytes += int64(n)
	p.tail += int64(n)
	p.items++
	if commit != nil {
		commit()
	}
	return nil
}

// finishPart completes the current output: closes the JSON array, and for
// files syncs, renames the temporary file into place and closes.
func (e *Exporter) finishPart() error {
	p := e.out
	var err error
	if e.format == JSON {
		end := "\n]\n"
		if p.items == 0 {
			end = "[]\n"
		}
		if _, err = p.w.Write([]byte(end)); err != nil {
			err = fmt.Errorf("feed: writing to %s: %w", p.name(), err)
		}
	}
	if err = p.finish(err, e.opts.durable); err == nil && p.kind != toWriter {
		e.written = append(e.written, p.final)
	}
	return err
}

// Close finishes the export: the JSON array is closed, everything is
// synced, and files are renamed into place. After finishing, it returns
// ErrDroppedFields when CSV fields were dropped and ErrItemsNotWritten when
// Writes failed (both, joined, when both happened): a caller that checks
// only Close still learns that items are missing. Calling it again, or after
// Abort, does nothing. If finishing a temporary file fails, the file is
// kept, and the error names it: Create with Resume adopts it.
func (e *Exporter) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if err := e.finishPart(); err != nil {
		return errors.Join(err, e.notWrittenError())
	}
	return errors.Join(e.droppedError(), e.notWrittenError())
}

// notWrittenError is ErrItemsNotWritten counting the failed Writes, or nil.
func (e *Exporter) notWrittenError() error {
	if e.failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d items (the first: %v)", ErrItemsNotWritten, e.failed, e.firstFailure)
}

// NotWritten returns how many Writes failed, so far: their items are not in
// the output.
func (e *Exporter) NotWritten() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// Abort ends the export without finishing it: the current temporary file
// is removed (or, if it was adopted with Resume, cut back to the adopted
// items and left for the next Resume), lines this exporter appended are
// truncated away, and an existing destination is left exactly as it was. Parts that Rotate already completed
// (Files) stay. It returns ErrNotDiscarded when items already went to an
// io.Writer, a FIFO or a device, or when other writers appended after this
// exporter's lines. Abort after Close or Abort does nothing, so
// "defer exp.Abort()" before a Close on success is safe.
func (e *Exporter) Abort() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.out.abort()
}

// Files returns the files written and completed so far (rotated parts, and
// all of them after Close).
func (e *Exporter) Files() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.written...)
}

// Adopted returns how many items Create carried over from the leftovers of
// an unfinished export (see Resume).
func (e *Exporter) Adopted() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.adopted
}

// Processor returns an item processor that exports each item's Value, for
// Collector.Pipeline. A failed Write fails the item (OnError hears of it).
func (e *Exporter) Processor() magpie.ItemProcessor {
	return func(_ context.Context, it *magpie.Item) error {
		return e.Write(it.Value)
	}
}
