package warc

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A file of 1 GiB holds hundreds of thousands of records, and its index
// lines come to tens of megabytes: finishIndex sorts them a run at a time
// (at most sortRunBytes of lines in memory), spills each sorted run to a
// temporary file beside the index, then merges the runs.

// sortRunBytes is how many bytes of index lines are sorted in memory at
// once; a variable so that tests can make runs small.
var sortRunBytes = 8 << 20

// maxRuns bounds the run files open at once: when the runs reach it, they
// are merged into one.
var maxRuns = 128

// finishIndex sorts the index lines written beside a file (keeping only
// those of records that end within size, unless size < 0) into its CDXJ
// index, and removes the unsorted one.
func finishIndex(path string, size int64) error {
	src, err := os.Open(path + openSuffix)
	if errors.Is(err, os.ErrNotExist) {
		src, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	var runs []*os.File
	defer func() {
		for _, r := range runs {
			_ = r.Close()
			_ = os.Remove(r.Name())
		}
	}()
	var last []string // the final run, kept in memory
	if src != nil {
		last, runs, err = sortRuns(src, size, filepath.Dir(path))
		_ = src.Close()
		if err != nil {
			return err
		}
	}
	tmp := path + ".tmp"
	if err := writeMerged(tmp, last, runs); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	if err := os.Remove(path + openSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("warc: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// sortRuns reads the index lines of src, keeps those within size (all if
// size < 0), and returns them sorted as the runs it spilled to files in dir
// plus the last run, still in memory.
func sortRuns(src io.Reader, size int64, dir string) (last []string, runs []*os.File, err error) {
	br := bufio.NewReaderSize(src, 64<<10)
	var run []string
	n := 0
	for {
		line, rerr := br.ReadString('\n')
		if line = strings.TrimSuffix(line, "\n"); line != "" && (size < 0 || lineWithin(line, size)) {
			run = append(run, line+"\n")
			n += len(line) + 1
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, runs, fmt.Errorf("warc: reading index lines: %w", rerr)
		}
		if n >= sortRunBytes {
			slices.Sort(run)
			f, err := spillRun(dir, run)
			if err != nil {
				return nil, runs, err
			}
			runs = append(runs, f)
			run, n = run[:0], 0
			if len(runs) >= maxRuns {
				if runs, err = mergeRuns(dir, runs); err != nil {
					return nil, runs, err
				}
			}
		}
	}
	slices.Sort(run)
	return run, runs, nil
}

// spillRun writes a sorted run to a temporary file in dir and returns it,
// rewound.
func spillRun(dir string, run []string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".cdxj-run-*")
	if err != nil {
		return nil, fmt.Errorf("warc: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	for _, l := range run {
		_, _ = bw.WriteString(l) // the error is kept by bw
	}
	if err = bw.Flush(); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("warc: sorting the index: %w", err)
	}
	return f, nil
}

// mergeRuns merges runs into one run file in dir, and closes and removes
// them; on error it returns runs still to be cleaned up.
func mergeRuns(dir string, runs []*os.File) ([]*os.File, error) {
	f, err := os.CreateTemp(dir, ".cdxj-run-*")
	if err != nil {
		return runs, fmt.Errorf("warc: %w", err)
	}
	name := f.Name()
	_ = f.Close()
	if err := writeMerged(name, nil, runs); err != nil {
		_ = os.Remove(name)
		return runs, err
	}
	if f, err = os.Open(name); err != nil {
		_ = os.Remove(name)
		return runs, fmt.Errorf("warc: %w", err)
	}
	for _, r := range runs {
		_ = r.Close()
		_ = os.Remove(r.Name())
	}
	return []*os.File{f}, nil
}

// writeMerged writes the merge of the sorted runs and of last to path,
// synced.
func writeMerged(path string, last []string, runs []*os.File) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	m := make(merge, 0, len(runs)+1)
	for _, r := range runs {
		c := &cursor{r: bufio.NewReaderSize(r, 64<<10)}
		if err := c.next(); err != nil {
			_ = f.Close()
			return err
		}
		if c.ok {
			m = append(m, c)
		}
	}
	if len(last) > 0 {
		m = append(m, &cursor{mem: last, line: last[0], ok: true})
	}
	heap.Init(&m)
	for len(m) > 0 {
		c := m[0]
		_, _ = bw.WriteString(c.line) // the error is kept by bw
		if err := c.next(); err != nil {
			_ = f.Close()
			return err
		}
		if c.ok {
			heap.Fix(&m, 0)
		} else {
			heap.Pop(&m)
		}
	}
	err = errors.Join(bw.Flush(), f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("warc: writing the index: %w", err)
	}
	return nil
}

// cursor reads one sorted run: from a file, or from memory.
type cursor struct {
	r    *bufio.Reader
	mem  []string
	line string
	ok   bool // line holds the run's next line
}

func (c *cursor) next() error {
	if c.r == nil {
		if c.ok {
			c.mem = c.mem[1:]
		}
		c.ok = len(c.mem) > 0
		if c.ok {
			c.line = c.mem[0]
		}
		return nil
	}
	line, err := c.r.ReadString('\n')
	if err == io.EOF && line == "" {
		c.ok = false
		return nil
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("warc: merging the index: %w", err)
	}
	c.line, c.ok = line, true
	return nil
}

// merge is a min-heap of runs by their next line.
type merge []*cursor

func (m merge) Len() int           { return len(m) }
func (m merge) Less(i, j int) bool { return m[i].line < m[j].line }
func (m merge) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *merge) Push(x any)        { *m = append(*m, x.(*cursor)) }
func (m *merge) Pop() any {
	old := *m
	c := old[len(old)-1]
	*m = old[:len(old)-1]
	return c
}
