package feed

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// die leaves e as a killed process would: its temporary file unlocked and
// never renamed, ending in torn bytes (a write the process did not finish,
// as a power loss may leave).
func die(t *testing.T, e *Exporter, torn string) string {
	t.Helper()
	f := e.out.file
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	tmp := e.out.tmp
	if err := f.Close(); err != nil { // the kernel drops the lock, as at exit
		t.Fatal(err)
	}
	return tmp
}

// readItems parses every item of a finished file in its format, failing
// the test on any that does not parse.
func readItems(t *testing.T, name string, format Format) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	switch format {
	case JSONLines:
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if line == "" {
				continue
			}
			var v struct{ N string }
			if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &v) != nil {
				t.Fatalf("%s: line %q does not parse", name, line)
			}
			out = append(out, v.N)
		}
	case JSON:
		var vs []struct{ N string }
		if err := json.Unmarshal(data, &vs); err != nil {
			t.Fatalf("%s is not a JSON array: %v\n%s", name, err, data)
		}
		for _, v := range vs {
			out = append(out, v.N)
		}
	case CSV:
		rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(rows) == 0 || strings.Join(rows[0], ",") != "N" {
			t.Fatalf("%s: CSV %q, %v", name, data, err)
		}
		for _, r := range rows[1:] {
			out = append(out, r[0])
		}
	}
	return out
}

func writeN(t *testing.T, e *Exporter, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := e.Write(struct{ N string }{N: strings.Repeat("x", i%3) + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
}

func names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strings.Repeat("x", i%3)+string(rune('a'+i)))
	}
	return out
}

// TestLeftoversRefusedOrAdopted: the temporary files of a dead exporter are
// refused loudly by a plain Create, adopted by Create with Resume (torn last
// item dropped), and a live exporter's file is neither.
func TestLeftoversRefusedOrAdopted(t *testing.T) {
	for _, tc := range []struct {
		ext    string
		format Format
		torn   string
	}{
		{"jsonl", JSONLines, `{"N":"tor`},
		{"json", JSON, ",\n{\"N\":"},
		{"csv", CSV, "\"torn\n"},
	} {
		t.Run(tc.ext, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "items."+tc.ext)
			if err := os.WriteFile(dest, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// Two runs die: 3 items and 2 items.
			e1, err := Create(dest)
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, e1, 0, 3)
			// A live exporter's file is not a leftover.
			live, err := Create(dest)
			if err != nil {
				t.Fatalf("Create beside a live exporter: %v", err)
			}
			_ = live.Abort()
			tmp1 := die(t, e1, tc.torn)
			if _, err := Create(dest); !errors.Is(err, ErrLeftover) || !strings.Contains(err.Error(), tmp1+" holds 3 items") {
				t.Fatalf("Create over a leftover: error = %v, want ErrLeftover naming %s and its 3 items", err, tmp1)
			}
			e2, err := Create(dest, Resume())
			if err != nil {
				t.Fatal(err)
			}
			if n := e2.Adopted(); n != 3 {
				t.Errorf("Adopted() = %d, want 3", n)
			}
			writeN(t, e2, 3, 5)
			// A live exporter's temporary file is not adopted by another.
			other, err := Create(dest, Resume())
			if err != nil {
				t.Fatal(err)
			}
			if n := other.Adopted(); n != 0 {
				t.Errorf("a second exporter adopted %d items of a live one", n)
			}
			if err := other.Abort(); err != nil {
				t.Fatal(err)
			}
			e3, err := Create(dest)
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, e3, 10, 12)
			die(t, e2, tc.torn)
			die(t, e3, "")

			// Abort of an adopting exporter leaves what it adopted for
			// the next Resume.
			a, err := Create(dest, Resume())
			if err != nil {
				t.Fatal(err)
			}
			if n := a.Adopted(); n != 7 {
				t.Errorf("Adopted() over two leftovers = %d, want 7", n)
			}
			writeN(t, a, 20, 21)
			if err := a.Abort(); err != nil {
				t.Fatal(err)
			}
			if data, _ := os.ReadFile(dest); string(data) != "old\n" {
				t.Errorf("Abort changed the destination: %q", data)
			}

			final, err := Create(dest, Resume())
			if err != nil {
				t.Fatal(err)
			}
			if n := final.Adopted(); n != 7 {
				t.Errorf("Adopted() after an Abort = %d, want 7", n)
			}
			writeN(t, final, 5, 6)
			if err := final.Close(); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(readItems(t, dest, tc.format), " ")
			for _, want := range append(names(0, 6), names(10, 12)...) {
				if strings.Count(" "+got+" ", " "+want+" ") != 1 {
					t.Errorf("item %q appears %d times in %q, want once", want, strings.Count(" "+got+" ", " "+want+" "), got)
				}
			}
			if n := len(strings.Fields(got)); n != 8 {
				t.Errorf("%d items in %q, want 8", n, got)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("directory holds %d files after Close, want only the destination", len(entries))
			}
		})
	}
}

// TestLeftoverWithoutItemsRemoved: a leftover that holds no complete item
// (a run killed before its first item) is removed, not refused.
func TestLeftoverWithoutItemsRemoved(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "items.jsonl")
	e, err := Create(dest)
	if err != nil {
		t.Fatal(err)
	}
	die(t, e, `{"N":`)
	e2, err := Create(dest)
	if err != nil {
		t.Fatalf("Create over an empty leftover: %v", err)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the destination", len(entries))
	}
}

// TestResumeRotatedParts: with Resume, rotated parts are numbered after the
// parts that exist, and the dead part's items are adopted.
func TestResumeRotatedParts(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "items-{n}.jsonl")
	e, err := Create(tmpl, Rotate(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, e, 0, 5) // parts 1 and 2 complete, part 3 holds one item
	die(t, e, "")
	if _, err := Create(tmpl, Rotate(2, 0)); !errors.Is(err, ErrLeftover) {
		t.Fatalf("Create error = %v, want ErrLeftover", err)
	}
	e2, err := Create(tmpl, Rotate(2, 0), Resume())
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, e2, 5, 6)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "items-3.jsonl")}
	if got := e2.Files(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Files() = %v, want %v", got, want)
	}
	var all []string
	for n := 1; n <= 3; n++ {
		all = append(all, readItems(t, filepath.Join(dir, "items-"+string(rune('0'+n))+".jsonl"), JSONLines)...)
	}
	if got, want := strings.Join(all, " "), strings.Join(names(0, 6), " "); got != want {
		t.Errorf("items over the parts = %q, want %q", got, want)
	}
}

// TestLeftoverBehindSymlink: the temporary file of a destination that is a
// symbolic link lives beside its target, and is found there; Close replaces
// the target and keeps the link.
func TestLeftoverBehindSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "real.jsonl")
	link := filepath.Join(dir, "items.jsonl")
	if err := os.Mkdir(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("data", "real.jsonl"), link); err != nil {
		t.Fatal(err)
	}
	e, err := Create(link)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, e, 0, 2)
	die(t, e, "")
	if _, err := Create(link); !errors.Is(err, ErrLeftover) {
		t.Fatalf("Create error = %v, want ErrLeftover", err)
	}
	e, err = Create(link, Resume())
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, e, 2, 3)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	if got, want := strings.Join(readItems(t, real, JSONLines), " "), strings.Join(names(0, 3), " "); got != want {
		t.Errorf("items = %q, want %q", got, want)
	}
}

// TestAppendAdoptsLeftovers: an Append exporter refuses or, with Resume,
// appends the items of a dead replacing exporter to the same file.
func TestAppendAdoptsLeftovers(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "items.jsonl")
	if err := os.WriteFile(dest, []byte("{\"N\":\"old\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Create(dest)
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, e, 0, 2)
	die(t, e, "{")
	if _, err := Create(dest, Append()); !errors.Is(err, ErrLeftover) {
		t.Fatalf("Create(Append) error = %v, want ErrLeftover", err)
	}
	e, err = Create(dest, Append(), Resume())
	if err != nil {
		t.Fatal(err)
	}
	if n := e.Adopted(); n != 2 {
		t.Errorf("Adopted() = %d, want 2", n)
	}
	writeN(t, e, 2, 3)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(readItems(t, dest, JSONLines), " "), "old "+strings.Join(names(0, 3), " "); got != want {
		t.Errorf("items = %q, want %q", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the destination", len(entries))
	}
}
