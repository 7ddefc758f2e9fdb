package feed_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/feed"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted at
// the end of the test; it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("needs a small tmpfs to fill, and mounting one failed (run as root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestFullDiskLeavesWholeLines fills a small tmpfs while writing, frees
// space, writes again, and checks that every line of the file parses: a
// write cut short by the full disk is taken back.
func TestFullDiskLeavesWholeLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []feed.Option
	}{
		{"append", []feed.Option{feed.Append()}},
		{"temporary file", nil},
		{"durable append", []feed.Option{feed.Append(), feed.Durable()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mountTmpfs(t, "64k")
			filler := filepath.Join(dir, "filler")
			if err := os.WriteFile(filler, make([]byte, 16<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(dir, "items.jsonl")
			e, err := feed.Create(dest, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// 1,500-byte items do not end on page boundaries: the write
			// that meets the full disk is cut short inside an item.
			item := func(i int) map[string]any { return map[string]any{"i": i, "pad": strings.Repeat("p", 1500)} }
			written := 0
			var werr error
			for i := 0; i < 200 && werr == nil; i++ {
				if werr = e.Write(item(i)); werr == nil {
					written++
				}
			}
			if !errors.Is(werr, syscall.ENOSPC) {
				t.Fatalf("Write on a full disk: error = %v after %d items, want ENOSPC", werr, written)
			}
			// A second failing write changes nothing either.
			if err := e.Write(item(-1)); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("second Write on a full disk: error = %v, want ENOSPC", err)
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			for i := 1000; i < 1003; i++ {
				if err := e.Write(item(i)); err != nil {
					t.Fatalf("Write after space returned: %v", err)
				}
				written++
			}
			// The caller that checks only Close learns of the two items
			// the full disk refused.
			if err := e.Close(); !errors.Is(err, feed.ErrItemsNotWritten) || !strings.Contains(err.Error(), ": 2 items") {
				t.Fatalf("Close after 2 failed Writes: error = %v, want ErrItemsNotWritten counting 2 items", err)
			}
			if n := e.NotWritten(); n != 2 {
				t.Errorf("NotWritten() = %d, want 2", n)
			}
			data, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(data), "\n")
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			for n, line := range lines {
				var v struct{ I int }
				if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &v) != nil {
					t.Fatalf("line %d of %d does not parse: %.60q...", n+1, len(lines), line)
				}
			}
			if len(lines) != written {
				t.Errorf("file has %d lines, want the %d items whose Write succeeded", len(lines), written)
			}
		})
	}
}

// TestCSVNeutralisesFormulas: cells a spreadsheet would run as formulas get
// a leading quote, plain numbers do not, and AllowFormulas writes them raw.
func TestCSVNeutralisesFormulas(t *testing.T) {
	cells := []struct{ in, want string }{
		{"=HYPERLINK(\"http://evil\")", "'=HYPERLINK(\"http://evil\")"},
		{"+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1:A2)", "'@SUM(A1:A2)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"-3.5", "-3.5"},
		{"+12", "+12"},
		{"-1e5", "-1e5"},
		{"plain = text", "plain = text"},
		{"", ""},
	}
	for _, allow := range []bool{false, true} {
		var buf bytes.Buffer
		var opts []feed.Option
		if allow {
			opts = append(opts, feed.AllowFormulas())
		}
		e := feed.New(&buf, feed.CSV, opts...)
		for _, c := range cells {
			if err := e.Write(map[string]any{"=cell": c.in, "n": -7}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		wantHeader := []string{"'=cell", "n"}
		if allow {
			wantHeader[0] = "=cell"
		}
		if !reflect.DeepEqual(rows[0], wantHeader) {
			t.Errorf("AllowFormulas %v: header = %q, want %q", allow, rows[0], wantHeader)
		}
		for i, c := range cells {
			want := c.want
			if allow {
				want = c.in
			}
			if got := rows[i+1]; got[0] != want || got[1] != "-7" {
				t.Errorf("AllowFormulas %v: cell %q written as %q (number %q), want %q", allow, c.in, got[0], got[1], want)
			}
		}
	}
}

// TestCreateNonRegularWritesInPlace: a FIFO or a device is written to, never
// replaced; WithFormat serves names without an extension.
func TestCreateNonRegularWritesInPlace(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "items.jsonl")
	if err := syscall.Mkfifo(fifo, 0o640); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo) // waits for the writer
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		data, _ := io.ReadAll(f)
		got <- string(data)
	}()
	e, err := feed.Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-got:
		if strings.Count(data, "\n") != len(products) {
			t.Errorf("reader of the FIFO got %q, want %d lines", data, len(products))
		}
	case <-time.After(time.Minute): // a generous bound: only a regression waits this long
		t.Fatal("no writer ever opened the FIFO (was it replaced?)")
	}
	fi, err := os.Lstat(fifo)
	if err != nil || fi.Mode()&fs.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o640 {
		t.Errorf("after Close the FIFO is %v (%v), want a named pipe with mode 0640", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the FIFO (no temporary file)", len(entries))
	}

	// A descriptor's name (as /dev/stdout is, redirected to a file) is
	// written through, appending; the file is not replaced.
	out := filepath.Join(dir, "stdout.txt")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("before\n"); err != nil {
		t.Fatal(err)
	}
	before, _ := f.Stat()
	for _, name := range []string{fmt.Sprintf("/proc/self/fd/%d", f.Fd()), fmt.Sprintf("/dev/fd/%d", f.Fd())} {
		e, err := feed.Create(name, feed.WithFormat(feed.JSONLines))
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, e)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(out)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the file behind the descriptor was replaced (%v)", err)
	}
	if data, _ := os.ReadFile(out); !strings.HasPrefix(string(data), "before\n") || strings.Count(string(data), "\n") != 1+2*len(products) {
		t.Errorf("the file behind the descriptor holds %q, want its line and two exports", data)
	}

	for _, name := range []string{"/dev/null", filepath.Join(dir, "link-to-null")} {
		if name != "/dev/null" {
			if err := os.Symlink("/dev/null", name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := feed.Create(name); !errors.Is(err, feed.ErrUnknownFormat) {
			t.Errorf("Create(%s) error = %v, want ErrUnknownFormat", name, err)
		}
		e, err := feed.Create(name, feed.WithFormat(feed.JSON))
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, e)
		if err := e.Close(); err != nil {
			t.Fatalf("Close of %s: %v", name, err)
		}
		if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			t.Fatalf("/dev/null is %v after Create(%s) (%v)", fi.Mode(), name, err)
		}
	}
}

func writeAll(t *testing.T, e *feed.Exporter) {
	t.Helper()
	for _, p := range products {
		if err := e.Write(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbortAndFileModes: Abort leaves an existing destination exactly as it
// was and removes the temporary file; new files take their mode from the
// umask, replaced files keep theirs.
func TestAbortAndFileModes(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, format := range []string{"jsonl", "csv", "json"} {
		dest := filepath.Join(dir, "items."+format)
		if err := os.WriteFile(dest, []byte("precious\n"), 0o604); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dest, 0o604); err != nil {
			t.Fatal(err)
		}
		e, err := feed.Create(dest)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, e)
		if err := e.Abort(); err != nil {
			t.Fatalf("Abort: %v", err)
		}
		if err := e.Write(products[0]); !errors.Is(err, feed.ErrClosed) {
			t.Errorf("Write after Abort error = %v, want ErrClosed", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close after Abort = %v, want nil", err)
		}
		if data, _ := os.ReadFile(dest); string(data) != "precious\n" {
			t.Errorf("%s after Abort holds %q, want it unchanged", format, data)
		}
		// Replacing keeps the old mode.
		e, err = feed.Create(dest)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, e)
		if err := e.Close(); err != nil && !errors.Is(err, feed.ErrDroppedFields) {
			t.Fatal(err)
		}
		if err := e.Abort(); err != nil {
			t.Errorf("Abort after Close = %v, want nil", err)
		}
		if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o604 {
			t.Errorf("replaced %s has mode %v, want 0604 as before", format, fi.Mode().Perm())
		}
	}
	// A new file: 0666 less the umask, as os.Create.
	fresh := filepath.Join(dir, "fresh.jsonl")
	e, err := feed.Create(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o640 {
		t.Errorf("new file has mode %v, want 0640 (0666 &^ umask 027)", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("directory holds %d files, want 4 (no temporary file)", len(entries))
	}

	// Append: Abort takes this exporter's lines back.
	log := filepath.Join(dir, "log.jsonl")
	if err := os.WriteFile(log, []byte("{\"old\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err = feed.Create(log, feed.Append())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, e)
	if err := e.Abort(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(log); string(data) != "{\"old\":1}\n" {
		t.Errorf("appended file after Abort holds %q, want its old line only", data)
	}

	// A writer cannot take items back, and says so.
	var buf bytes.Buffer
	w := feed.New(&buf, feed.JSONLines)
	writeAll(t, w)
	if err := w.Abort(); !errors.Is(err, feed.ErrNotDiscarded) {
		t.Errorf("Abort of a writer exporter = %v, want ErrNotDiscarded", err)
	}
}

// recorder is a slog.Handler that keeps records.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	r.msgs = append(r.msgs, msg)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// TestCSVDroppedFieldsReported: a field missing from the first item is
// reported once through the Logger, counted, and Close says so; Columns
// makes the header a choice that is not reported.
func TestCSVDroppedFieldsReported(t *testing.T) {
	rec := &recorder{}
	var buf bytes.Buffer
	e := feed.New(&buf, feed.CSV, feed.Logger(slog.New(rec)))
	writeAll(t, e) // products[1] has tags, the first does not
	if err := e.Write(product{Name: "again", Tags: []string{"c"}}); err != nil {
		t.Fatal(err)
	}
	err := e.Close()
	if !errors.Is(err, feed.ErrDroppedFields) || !strings.Contains(err.Error(), "tags (2 items)") {
		t.Errorf("Close error = %v, want ErrDroppedFields naming tags (2 items)", err)
	}
	if got := e.DroppedFields(); !reflect.DeepEqual(got, map[string]int{"tags": 2}) {
		t.Errorf("DroppedFields() = %v, want tags: 2", got)
	}
	if len(rec.msgs) != 1 || !strings.HasPrefix(rec.msgs[0], "WARN") || !strings.Contains(rec.msgs[0], "field=tags") {
		t.Errorf("log = %q, want one Warn naming the field tags", rec.msgs)
	}
	if rows, err := csv.NewReader(&buf).ReadAll(); err != nil || len(rows) != len(products)+2 {
		t.Errorf("the file is not complete: %d rows, %v", len(rows), err)
	}

	buf.Reset()
	e = feed.New(&buf, feed.CSV, feed.Columns("name"))
	writeAll(t, e)
	if err := e.Close(); err != nil {
		t.Errorf("Close with Columns = %v, want nil", err)
	}
}

// TestDurableCreate: Durable syncs every item and still produces the file.
func TestDurableCreate(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "items.json")
	e, err := feed.Create(dest, feed.Durable())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var got []product
	data, _ := os.ReadFile(dest)
	if err := json.Unmarshal(data, &got); err != nil || !reflect.DeepEqual(got, products) {
		t.Errorf("read back %+v (%v), want %+v", got, err, products)
	}
}

// failingWriter accepts up to room bytes, then fails.
type failingWriter struct {
	room int
	buf  bytes.Buffer
}

var errNoRoom = errors.New("no room")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= w.room {
		w.room -= len(p)
		return w.buf.Write(p)
	}
	n := w.room
	w.room = 0
	w.buf.Write(p[:n])
	return n, errNoRoom
}

// TestWriterPartialWrite: a writer that fails before taking any byte
// leaves the stream whole and later items go on; one that fails part way
// cannot be rewound, so that Write and every later one return ErrCorrupt
// instead of gluing the next item to the broken one.
func TestWriterPartialWrite(t *testing.T) {
	line, _ := json.Marshal(products[0])
	for _, tc := range []struct {
		name    string
		room    int
		corrupt bool
	}{
		{"fails before the item", len(line) + 1, false},
		{"fails inside the item", len(line) + 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &failingWriter{room: tc.room}
			e := feed.New(w, feed.JSONLines)
			if err := e.Write(products[0]); err != nil {
				t.Fatal(err)
			}
			err := e.Write(products[0])
			if !errors.Is(err, errNoRoom) || errors.Is(err, feed.ErrCorrupt) != tc.corrupt {
				t.Fatalf("Write error = %v, want errNoRoom, ErrCorrupt %v", err, tc.corrupt)
			}
			w.room = 1 << 20
			err = e.Write(products[0])
			if tc.corrupt && !errors.Is(err, feed.ErrCorrupt) || !tc.corrupt && err != nil {
				t.Errorf("Write after the failure = %v, want ErrCorrupt %v", err, tc.corrupt)
			}
		})
	}
}
