package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 40 point 14: --state DIR, as Scrapy's JOBDIR: an existing directory,
// or a path ending in a slash (created), holds the state file under a fixed
// name, and the same command run again finds the crawl there.
func TestCLIStateDirectory(t *testing.T) {
	site := newPagesSite(t, 3, nil)
	for _, tc := range []struct {
		name   string
		exists bool // the directory is made before the run
		arg    func(dir string) string
	}{
		{"existing", true, func(dir string) string { return dir }},
		{"existing with slash", true, func(dir string) string { return dir + "/" }},
		{"new with slash", false, func(dir string) string { return dir + "/" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "jobs", "site")
			if tc.exists {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"crawl", site.URL + "/", "--allow-loopback", "-q", "--state", tc.arg(dir), "-o", "-"}
			first := cli(t, "", args...)
			if first.code != 0 {
				t.Fatalf("--state %s: exit %d; stderr:\n%s", tc.arg(dir), first.code, first.stderr)
			}
			wantPages(t, jsonLines(t, first.stdout), site.URL, 3)
			file := filepath.Join(dir, "state.db")
			if st, err := os.Stat(file); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("--state %s made no state file %s: %v", tc.arg(dir), file, err)
			}
			again := cli(t, "", args...)
			if again.code != 0 || again.stdout != "" || !strings.Contains(again.stderr, "the crawl in "+file+" is finished") {
				t.Errorf("run again: exit %d, stdout %q, stderr:\n%s\nwant 0, nothing written, and the crawl in %s finished",
					again.code, again.stdout, again.stderr, file)
			}
		})
	}
}
