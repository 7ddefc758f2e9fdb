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
// Nothing is opened before the first item: a crawl that cannot start leaves
// an existing file as it was. Safe for concurrent use.
type output struct {
	path       string // "-" for standard output
	format     feed.Format
	nonRegular bool
	opts       []feed.Option
	stdout     io.Writer
	// onFail is told of the first error opening or writing the output, so
	// that the crawl stops instead of fetching pages nobody will see.
	onFail func(error)

	// mu guards everything below.
	mu   sync.Mutex
	exp  *feed.Exporter
	file *os.File // the opened non-regular file
	err  error    // the first error opening or writing
}

// planOutput checks -o and --format before the crawl starts and returns the
// output, not yet opened. format "" means: by the file's extension, JSON
// lines for standard output and non-regular files without one. appendLines
// makes a JSON lines file grow instead of being replaced (a resumed crawl).
func planOutput(path, format string, appendLines bool, columns []string, stdout io.Writer) (*output, error) {
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
	// A regular file: feed.Create names the format by the extension.
	byExt, err := feed.FormatOf(o.path)
	if err != nil {
		return nil, usagef("-o %s: the file name's extension picks the format: .jsonl, .csv or .json (--format is for -o - and pipes)", o.path)
	}
	if format != "" && named != byExt {
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
	if appendLines {
		if o.format != feed.JSONLines {
			if _, err := os.Stat(o.path); err == nil {
				// Replacing it would lose the items of the runs before.
				return nil, usagef("-o %s: a resumed crawl (--state) can only add to a .jsonl file; give a new file name", o.path)
			}
		}
		// Resume adopts the items a killed run left in its temporary file
		// (CSV, JSON): their pages are acknowledged in the state file and
		// will not be fetched again.
		o.opts = append(o.opts, feed.Append(), feed.Resume())
	}
	return o, nil
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
		err = o.exp.Write(v)
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
func (o *output) finish(succeeded bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
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
