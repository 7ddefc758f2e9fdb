package feed_test

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/feed"
)

type product struct {
	Name  string   `json:"name"`
	Price float64  `json:"price"`
	Tags  []string `json:"tags,omitempty"`
	Skip  string   `json:"-"`
}

var products = []product{
	{Name: "plain", Price: 1.5},
	{Name: `comma, "quotes"`, Price: 2, Tags: []string{"a", "b"}},
	{Name: "new\nline and tab\t", Price: 3.25},
	{Name: "ünïcode ✓", Price: 0},
}

func TestJSONLinesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := feed.New(&buf, feed.JSONLines)
	for _, p := range products {
		if err := e.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var got []product
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var p product
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, p)
	}
	if !reflect.DeepEqual(got, products) {
		t.Errorf("read back %+v, want %+v", got, products)
	}
}

func TestJSONArrayRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, len(products)} {
		var buf bytes.Buffer
		e := feed.New(&buf, feed.JSON)
		for _, p := range products[:n] {
			if err := e.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		var got []product
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%d items: %q is not a JSON array: %v", n, buf.String(), err)
		}
		if len(got) != n || (n > 0 && !reflect.DeepEqual(got, products[:n])) {
			t.Errorf("%d items: read back %+v", n, got)
		}
	}
}

func TestCSVRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := feed.New(&buf, feed.CSV)
	for _, p := range products {
		if err := e.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Write(map[string]any{"price": 9, "name": "from a map", "extra": true}); err != nil {
		t.Fatal(err)
	}
	// Fields the first item lacked are dropped, and never silently.
	if err := e.Close(); !errors.Is(err, feed.ErrDroppedFields) {
		t.Fatalf("Close error = %v, want ErrDroppedFields", err)
	}
	if got, want := e.DroppedFields(), map[string]int{"tags": 1, "extra": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("DroppedFields() = %v, want %v", got, want)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("reading the CSV back: %v\n%s", err, buf.String())
	}
	want := [][]string{
		{"name", "price"}, // the first item's fields; omitempty tags absent there
		{"plain", "1.5"},
		{`comma, "quotes"`, "2"},
		{"new\nline and tab\t", "3.25"},
		{"ünïcode ✓", "0"},
		{"from a map", "9"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("CSV rows = %q, want %q", rows, want)
	}

	buf.Reset()
	e = feed.New(&buf, feed.CSV, feed.Columns("tags", "name", "missing"))
	_ = e.Write(products[1])
	_ = e.Close()
	rows, _ = csv.NewReader(&buf).ReadAll()
	if want := [][]string{{"tags", "name", "missing"}, {`["a","b"]`, `comma, "quotes"`, ""}}; !reflect.DeepEqual(rows, want) {
		t.Errorf("CSV with Columns = %q, want %q", rows, want)
	}
}

func TestCreateWritesThroughTempFileAndRotates(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "items-{n}.jsonl")
	e, err := feed.Create(name, feed.Rotate(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range products[:3] {
		wg.Go(func() {
			if err := e.Write(p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, "items-2.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the open part exists under its final name before Close (err %v)", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Write(products[0]); !errors.Is(err, feed.ErrClosed) {
		t.Errorf("Write after Close error = %v, want ErrClosed", err)
	}
	files := e.Files()
	want := []string{filepath.Join(dir, "items-1.jsonl"), filepath.Join(dir, "items-2.jsonl")}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("Files() = %v, want %v", files, want)
	}
	lines := 0
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(data), "\n")
		if wantN := []int{2, 1}[i]; n != wantN {
			t.Errorf("%s has %d items, want %d", f, n, wantN)
		}
		lines += n
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 || lines != 3 {
		t.Errorf("directory holds %d files and %d items, want 2 and 3 (no temporary file left)", len(entries), lines)
	}

	if _, err := feed.Create(filepath.Join(dir, "x.txt")); !errors.Is(err, feed.ErrUnknownFormat) {
		t.Errorf("Create(x.txt) error = %v, want ErrUnknownFormat", err)
	}
}

func TestAppendJSONLines(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log.jsonl")
	for range 2 {
		e, err := feed.Create(name, feed.Append())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Write(products[0]); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(name)
	if n := strings.Count(string(data), "\n"); n != 2 {
		t.Errorf("appended file has %d lines, want 2: %q", n, data)
	}
}
