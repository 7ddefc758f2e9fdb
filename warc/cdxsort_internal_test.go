package warc

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The index is sorted a run at a time and merged: the result is the lines
// of the records within the file, sorted, whatever the number of runs, and
// no run file is left behind.
func TestFinishIndexRuns(t *testing.T) {
	for _, c := range []struct{ runBytes, maxRuns int }{{8 << 20, 128}, {4 << 10, 128}, {200, 7}} {
		runBytes := c.runBytes
		t.Run(fmt.Sprint(runBytes), func(t *testing.T) {
			defer func(b, r int) { sortRunBytes, maxRuns = b, r }(sortRunBytes, maxRuns)
			sortRunBytes, maxRuns = runBytes, c.maxRuns
			dir := t.TempDir()
			path := filepath.Join(dir, "x.cdxj")
			rng := rand.New(rand.NewPCG(1, uint64(runBytes)))
			const size = 1 << 20
			var in, want []string
			for i := range 3000 {
				offset := rng.Int64N(size + size/10)
				l := cdxLine{target: fmt.Sprintf("http://127.0.0.1/p/%d?q=%d", rng.IntN(500), i), mime: "text/html", status: 200}
				line := string(appendTail(l.appendHead(nil), offset, 100, "x.warc.gz", nil))
				in = append(in, line)
				if offset+100 <= size {
					want = append(want, line)
				}
			}
			if err := os.WriteFile(path+openSuffix, []byte(strings.Join(in, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := finishIndex(path, size); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			if string(got) != strings.Join(want, "") {
				t.Errorf("index of %d lines differs from the %d sorted lines within the file", strings.Count(string(got), "\n"), len(want))
			}
			left, _ := filepath.Glob(filepath.Join(dir, "*"))
			if len(left) != 1 || left[0] != path {
				t.Errorf("files left: %v, want only %s", left, path)
			}
		})
	}
}

// A file whose index lines were never written gets an empty index.
func TestFinishIndexNoLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.cdxj")
	if err := finishIndex(path, -1); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("index %q, %v; want empty", b, err)
	}
}
