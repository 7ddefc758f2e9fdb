package feed

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// failingWriter accepts ok writes, then fails every one with ENOSPC.
type failingWriter struct {
	ok  int
	out strings.Builder
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok == 0 {
		return 0, syscall.ENOSPC
	}
	w.ok--
	return w.out.Write(p)
}

// TestCloseReportsItemsNotWritten: Writes that failed (the writer refused,
// the value could not be encoded) are counted, and Close, which still
// finishes the export, returns ErrItemsNotWritten with the count; an export
// without failures closes with nil.
func TestCloseReportsItemsNotWritten(t *testing.T) {
	w := &failingWriter{ok: 2}
	e := New(w, JSONLines)
	writeN(t, e, 0, 2)
	if err := e.Write(struct{ N string }{"c"}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write to a full writer: error = %v, want ENOSPC", err)
	}
	if err := e.Write(math.Inf(1)); err == nil {
		t.Fatal("Write(+Inf) = nil, want an encoding error")
	}
	err := e.Close()
	if !errors.Is(err, ErrItemsNotWritten) || !strings.Contains(err.Error(), ": 2 items") || !errors.Is(err, ErrItemsNotWritten) {
		t.Fatalf("Close = %v, want ErrItemsNotWritten counting 2 items", err)
	}
	if !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Errorf("Close = %v, want the first failure named", err)
	}
	if got := strings.Count(w.out.String(), "\n"); got != 2 {
		t.Errorf("writer got %d lines, want the 2 written", got)
	}
	if err := e.Write(struct{ N string }{"d"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if n := e.NotWritten(); n != 2 {
		t.Errorf("NotWritten() = %d, want 2 (a Write after Close is not counted)", n)
	}

	ok := New(io.Discard, CSV)
	writeN(t, ok, 0, 3)
	if err := ok.Close(); err != nil {
		t.Errorf("Close after 3 good Writes = %v, want nil", err)
	}
}

// TestFormatOfScrapyJL: Scrapy's .jl names JSON Lines.
func TestFormatOfScrapyJL(t *testing.T) {
	for _, name := range []string{"items.jl", "ITEMS.JL", "a.jsonl", "a.ndjson"} {
		if f, err := FormatOf(name); err != nil || f != JSONLines {
			t.Errorf("FormatOf(%q) = %v, %v; want JSONLines", name, f, err)
		}
	}
}

// TestAppendCSVAndJSON: Append carries the items of an existing CSV or JSON
// export over, leaving the file as it was until Close; a killed appender's
// temporary file holds old and new items and Resume adopts it without
// copying the destination twice; an unfinished copy is never adopted; a
// file that is not a complete export is refused.
func TestAppendCSVAndJSON(t *testing.T) {
	for _, tc := range []struct {
		ext    string
		format Format
	}{{"csv", CSV}, {"json", JSON}} {
		t.Run(tc.ext, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "items."+tc.ext)
			first, err := Create(dest)
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, first, 0, 3)
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(dest)

			second, err := Create(dest, Append())
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, second, 3, 5)
			if now, _ := os.ReadFile(dest); string(now) != string(before) {
				t.Fatalf("%s changed before Close:\n%s", dest, now)
			}
			die(t, second, "") // killed: old and new items in its temporary file

			third, err := Create(dest, Append(), Resume())
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, third, 5, 6)
			if err := third.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := readItems(t, dest, tc.format), names(0, 6); !slices.Equal(got, want) {
				t.Fatalf("after append, kill, resume: items %q, want %q", got, want)
			}

			// A copy cut short by a kill is removed, not adopted.
			stale := filepath.Join(dir, ".items."+tc.ext+copyMarker+"dead")
			if err := os.WriteFile(stale, []byte("half"), 0o644); err != nil {
				t.Fatal(err)
			}
			fourth, err := Create(dest, Append())
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, fourth, 6, 7)
			if err := fourth.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := readItems(t, dest, tc.format), names(0, 7); !slices.Equal(got, want) {
				t.Errorf("after a stale copy: items %q, want %q", got, want)
			}
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				t.Errorf("stale copy %s still there (%v)", stale, err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("directory holds %d files, want only %s", len(entries), dest)
			}

			// Bytes after the last item: refused, the file untouched.
			broken := string(before[:len(before)-2])
			if err := os.WriteFile(dest, []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Create(dest, Append()); !errors.Is(err, ErrNotAppendable) {
				t.Errorf("Create(Append) on a cut %s: error = %v, want ErrNotAppendable", tc.ext, err)
			}
			if now, _ := os.ReadFile(dest); string(now) != broken {
				t.Errorf("refused file changed:\n%s", now)
			}
		})
	}
}

// TestAppendCSVHeaderMustMatchColumns: appending under Columns other than
// the file's header would drop or misplace its values: refused.
func TestAppendCSVHeaderMustMatchColumns(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "items.csv")
	if err := os.WriteFile(dest, []byte("N,M\na,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dest, Append(), Columns("N")); !errors.Is(err, ErrNotAppendable) {
		t.Errorf("Create(Append, Columns(N)) on header N,M: error = %v, want ErrNotAppendable", err)
	}
	e, err := Create(dest, Append(), Columns("N", "M"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Write(map[string]string{"N": "c", "M": "d"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(dest); string(data) != "N,M\na,b\nc,d\n" {
		t.Errorf("appended CSV = %q", data)
	}
}

// TestAppendDurableRelativeName: a durable Append to a file named relative
// to the working directory syncs that directory and keeps every item.
func TestAppendDurableRelativeName(t *testing.T) {
	t.Chdir(t.TempDir())
	first, err := Create("items.json", Durable())
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, first, 0, 2)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := Create("items.json", Append(), Durable())
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, second, 2, 4)
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readItems(t, "items.json", JSON), names(0, 4); !slices.Equal(got, want) {
		t.Errorf("items %q, want %q", got, want)
	}
}
