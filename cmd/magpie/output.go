package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/feed"
)

// formats are the --format names.
var formats = map[string]feed.Format{"jsonl": feed.JSONLines, "csv": feed.CSV, "json": feed.JSON}

// output is where the items go: standard output, a regular file (written
// through feed.Create: a temporary file renamed into place) or a file that
// is not regular (a FIFO, /dev/stdout, /dev/null), which is opened and
// written, never replaced.
//
// A regular file is opened before the first request (prepare) and written
// through a temporary file; a crawl that cannot start aborts it, leaving an
// existing file as it was. Other outputs are opened at the first item. Safe
// for concurrent use.
type output struct {
	path       string // "-" for standard output
	format     feed.Format
	nonRegular bool
	// appendItems: the output grows instead of being replaced; adopt: a
	// killed run's items are taken up (feed.Resume).
	appendItems, adopt bool
	opts               []feed.Option
	stdout             io.Writer
	// line, when set, is the terminal line the live progress report shares
	// with items written to standard output: it is cleared before each.
	line *liveLine
	// onFail is told of the first error opening or writing the output, so
	// that the crawl stops instead of fetching pages nobody will see.
	onFail func(error)

	// mu guards everything below.
	mu    sync.Mutex
	exp   *feed.Exporter
	file  *os.File // the opened non-regular file
	err   error    // the first error opening or writing
	items int      // written by this run
	// finished is set by the first finish, whose error finishErr is.
	finished  bool
	finishErr error
}

// outputMode says how a run meets what earlier runs wrote to -o.
type outputMode struct {
	// appendItems makes the output grow instead of being replaced: a
	// resumed --state crawl. JSON lines are appended in place; a CSV or
	// JSON file's items are carried over into the new file.
	appendItems bool
	// adopt takes up the items a killed run left in its temporary file
	// (feed.Resume): --resume-output, or a resumed --state crawl.
	adopt bool
}

// planOutput checks -o and --format before the crawl starts and returns the
// output, not yet opened. format "" means: by the file's extension, JSON
// lines for standard output and non-regular files without one; --format
// names the format of a file whose extension names none.
func planOutput(path, format string, mode outputMode, columns []string, stdout io.Writer) (*output, error) {
	o := &output{path: path, stdout: stdout}
	if path == "" {
		o.path = "-"
	}
	if len(columns) > 0 {
		o.opts = append(o.opts, feed.Columns(columns...))
	}
	var named feed.Format
	if format != "" {
		f, ok := formats[strings.ToLower(format)]
		if !ok {
			return nil, usagef("--format %q: want jsonl, csv or json", format)
		}
		named = f
	}
	if o.path != "-" {
		if st, err := os.Stat(o.path); err == nil && !st.Mode().IsRegular() {
			if st.IsDir() {
				return nil, usagef("-o %s: is a directory", o.path)
			}
			o.nonRegular = true
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("-o: %w", err)
		}
	}
	if o.path == "-" || o.nonRegular {
		o.format = feed.JSONLines
		if f, err := feed.FormatOf(o.path); err == nil {
			o.format = f
		}
		if format != "" {
			o.format = named
		}
		return o, nil
	}
	// A regular file: its extension names the format, or --format does.
	byExt, err := feed.FormatOf(o.path)
	switch {
	case err != nil && format == "":
		return nil, usagef("-o %s: the extension names no format: use .jsonl (or .jl), .csv or .json, or name it with --format jsonl, csv or json", o.path)
	case err != nil:
		byExt = named
		o.opts = append(o.opts, feed.WithFormat(named))
	case format != "" && named != byExt:
		return nil, usagef("-o %s: --format %s contradicts the extension", o.path, format)
	}
	o.format = byExt
	if dir := filepath.Dir(o.path); dir != "" {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("-o: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("-o %s: %s is not a directory", o.path, dir)
		}
	}
	if mode.appendItems {
		o.appendItems = true
		// The pages of the runs before are acknowledged in the state file
		// and will not be fetched again: their items must stay.
		o.opts = append(o.opts, feed.Append())
	}
	if mode.adopt {
		o.adopt = true
		o.opts = append(o.opts, feed.Resume())
	}
	return o, nil
}

// prepare opens a regular output file before the first request, so that
// what would refuse it (the leftovers of a killed run, a CSV or JSON file
// a resumed crawl cannot add to) is said before any page is fetched. JSON
// lines appended in place are opened at the first item, as other outputs
// are: nothing can refuse them, and a crawl without items creates no file.
func (o *output) prepare() error {
	if o.path == "-" || o.nonRegular || o.format == feed.JSONLines && o.appendItems {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.openLocked()
	switch {
	case errors.Is(err, feed.ErrLeftover) && o.adopt:
		// Adopting was asked for, and refused: its CSV columns differ.
		return usagef("-o %s: the items a killed run left in %s have other columns than this run's --field flags: run with the same --field flags, or remove them",
			o.path, strings.Join(leftoverFiles(o.path), ", "))
	case errors.Is(err, feed.ErrLeftover):
		return usagef("-o %s: a run that was killed left items in %s; pass --resume-output to carry them over into this run's output (a resumed --state crawl does so by itself), or remove them",
			o.path, strings.Join(leftoverFiles(o.path), ", "))
	case errors.Is(err, feed.ErrNotAppendable):
		return usagef("-o %s: a resumed --state crawl adds to this file, but it is not a complete %s export: %v; give another -o", o.path, formatName(o.format), err)
	}
	return err
}

// leftoverFiles names the temporary files of killed runs beside path.
func leftoverFiles(path string) []string {
	found, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+globEscape(filepath.Base(path))+".tmp-*"))
	if len(found) == 0 {
		return []string{"temporary files beside it"}
	}
	return found
}

// globEscape quotes the characters filepath.Match gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// formatName is the --format name of f.
func formatName(f feed.Format) string {
	for name, v := range formats {
		if v == f {
			return name
		}
	}
	return "jsonl"
}

// abandon ends the output of a run that wrote nothing and must leave the
// file as it was (a finished --state crawl run again).
func (o *output) abandon() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.exp == nil {
		return nil
	}
	err := o.exp.Abort()
	if o.file != nil {
		err = errors.Join(err, o.file.Close())
	}
	o.exp = nil
	return err
}

// openLocked opens the output; the caller holds mu.
func (o *output) openLocked() error {
	switch {
	case o.exp != nil:
		return nil
	case o.path == "-":
		o.exp = feed.New(o.stdout, o.format, o.opts...)
	case o.nonRegular:
		// Opened as it is (a FIFO blocks here until it has a reader), and
		// never truncated, renamed over or removed.
		f, err := os.OpenFile(o.path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		o.file = f
		o.exp = feed.New(f, o.format, o.opts...)
	default:
		exp, err := feed.Create(o.path, o.opts...)
		if err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		o.exp = exp
	}
	return nil
}

// write exports v, opening the output at the first item.
func (o *output) write(v any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	err := o.openLocked()
	if err == nil {
		if o.line != nil && o.path == "-" {
			err = o.line.clearFor(func() error { return o.exp.Write(v) })
		} else {
			err = o.exp.Write(v)
		}
	}
	if err == nil {
		o.items++
	}
	if err != nil {
		o.err = err
		if o.onFail != nil {
			o.onFail(err)
		}
	}
	return err
}

// Processor plugs the output into a collector's item pipeline.
func (o *output) Processor() magpie.ItemProcessor {
	return func(_ context.Context, it *magpie.Item) error { return o.write(it.Value) }
}

// finish completes the output. After a crawl that succeeded an output with
// no items is still written (an empty file, "[]" for JSON); after one that
// failed, an output that never had an item is not touched at all.
//
// Only the first call does it; a later one, or one made while it runs (a
// forced exit's, see onForcedExit), waits for it and returns its error, so
// that the rename putting -o in place is never cut short.
func (o *output) finish(succeeded bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.finished {
		o.finished = true
		o.finishErr = o.finishLocked(succeeded)
	}
	return o.finishErr
}

// finishLocked is finish's first call; the caller holds mu.
func (o *output) finishLocked(succeeded bool) error {
	if o.exp != nil && o.items == 0 && !succeeded && o.err == nil {
		// Opened before the first request (prepare), never written.
		err := o.exp.Abort()
		o.exp = nil
		return err
	}
	if o.exp == nil {
		if !succeeded || o.err != nil {
			return o.err
		}
		if err := o.openLocked(); err != nil {
			return err
		}
	}
	err := o.exp.Close()
	if o.file != nil {
		err = errors.Join(err, o.file.Close())
	}
	return errors.Join(o.err, err)
}
