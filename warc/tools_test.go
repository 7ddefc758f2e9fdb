package warc_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie/warc"
)

// warcTools returns the directory where .ci/warc-tools.sh installed
// Webrecorder's tools (MAGPIE_WARC_TOOLS): node_modules/warcio and
// replaywebpage/. Without it the test is skipped, or fails when
// MAGPIE_REQUIRE_WARC_TOOLS=1 (as CI sets).
func warcTools(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MAGPIE_WARC_TOOLS")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "warcio", "package.json"))
	if dir == "" || err != nil {
		if os.Getenv("MAGPIE_REQUIRE_WARC_TOOLS") == "1" {
			t.Fatalf("MAGPIE_REQUIRE_WARC_TOOLS=1 but MAGPIE_WARC_TOOLS=%q has no warcio (%v): run .ci/warc-tools.sh", dir, err)
		}
		t.Skip("Webrecorder's tools are not installed: source .ci/warc-tools.sh")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("MAGPIE_WARC_TOOLS is set but node is missing: %v", err)
	}
	return dir
}

// node runs a node program with the tools' modules on NODE_PATH.
func node(t *testing.T, tools string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(tools, "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %v: %v\n%s", args, err, stderr)
	}
	return out
}

// TestWarcioReadsTheCrawl has Webrecorder's warcio read every file of a
// crawl, rotated into several: the digests it recomputes match, the records
// match the requests the server answered, and its CDXJ index of each file
// names the records (offset and length) that the Writer's own index does.
func TestWarcioReadsTheCrawl(t *testing.T) {
	tools := warcTools(t)
	s := newSite(t)
	dir := t.TempDir()
	counts := crawl(t, s, dir, warc.MaxFileSize(8<<10))
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 || len(files) != counts.Files {
		t.Fatalf("%d files (Counts.Files %d), want them rotated into at least 2", len(files), counts.Files)
	}

	var got struct {
		Counts map[string]int
		Bad    []string
	}
	out := node(t, tools, append([]string{filepath.Join("testdata", "check.mjs")}, files...)...)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("check.mjs printed %q: %v", out, err)
	}
	for _, b := range got.Bad {
		t.Error(b)
	}
	reqs := s.requests()
	if got.Counts["request"] != reqs || got.Counts["response"]+got.Counts["revisit"] != reqs || got.Counts["warcinfo"] != len(files) {
		t.Errorf("warcio counts %v; the server answered %d requests in %d files", got.Counts, reqs, len(files))
	}
	if got.Counts["revisit"] != 2 { // /b (or /a) identical, and the 304
		t.Errorf("revisit records = %d, want 2", got.Counts["revisit"])
	}

	cli := filepath.Join(tools, "node_modules", "warcio", "dist", "cli.js")
	indexed := 0
	for _, f := range files {
		theirs := cdxKeys(t, string(node(t, tools, cli, "cdx-index", f)))
		data, err := os.ReadFile(strings.TrimSuffix(f, ".warc.gz") + ".cdxj")
		if err != nil {
			t.Fatal(err)
		}
		ours := cdxKeys(t, string(data))
		indexed += len(theirs)
		if !slices.Equal(theirs, ours) {
			t.Errorf("%s: warcio indexes\n%v\nthe Writer's index has\n%v", filepath.Base(f), theirs, ours)
		}
	}

	if indexed != reqs {
		t.Errorf("warcio indexed %d records, want one per request (%d)", indexed, reqs)
	}
}

// cdxKeys reads CDXJ lines as sorted "urlkey url offset length status" keys.
func cdxKeys(t *testing.T, text string) []string {
	t.Helper()
	var keys []string
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, " ", 3)
		if len(parts) != 3 {
			t.Fatalf("CDXJ line %q", line)
		}
		var v struct{ URL, Offset, Length, Status, Digest string }
		if err := json.Unmarshal([]byte(parts[2]), &v); err != nil {
			t.Fatalf("CDXJ line %q: %v", line, err)
		}
		keys = append(keys, strings.Join([]string{parts[0], v.URL, v.Offset, v.Length, v.Status, v.Digest}, " "))
	}
	slices.Sort(keys)
	return keys
}
