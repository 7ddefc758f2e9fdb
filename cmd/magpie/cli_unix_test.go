//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Issue 19 point 1: -o names a FIFO, /dev/stdout or /dev/null: the items are
// written to it, it is never replaced, and no extension is needed.
func TestCLIOutputToNonRegularFiles(t *testing.T) {
	site := newPagesSite(t, 3, nil)
	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "items")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		got := make(chan string, 1)
		go func() {
			f, err := os.Open(fifo) // blocks until magpie opens it for writing
			if err != nil {
				got <- "open: " + err.Error()
				return
			}
			defer f.Close()
			got <- readAll(f)
		}()
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", fifo)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		wantPages(t, jsonLines(t, <-got), site.URL, 3)
		st, err := os.Lstat(fifo)
		if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("after the crawl %s is %v (err %v), want the FIFO still there", fifo, st.Mode(), err)
		}
	})
	t.Run("/dev/stdout", func(t *testing.T) {
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", "/dev/stdout")
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		wantPages(t, jsonLines(t, r.stdout), site.URL, 3)
	})
	t.Run("/dev/null", func(t *testing.T) {
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", "/dev/null", "--format", "csv")
		if r.code != 0 || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("/dev/null is now %v (%v)", st.Mode(), err)
		}
	})
}
