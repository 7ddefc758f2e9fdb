package sqlitestore

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie/queue"
)

// seedQueue creates the crawl database at dbPath with u queued, and closes
// it, for a crawl run by a helper process.
func seedQueue(t *testing.T, dbPath, u string) {
	t.Helper()
	s, err := Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(1, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(u); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// startHelper re-executes the test binary to run the helper test named
// test with env added: a process of its own, which a test can kill -9.
// done receives its exit, with its output when it failed.
func startHelper(t *testing.T, test string, env ...string) (cmd *exec.Cmd, done chan error) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, out)
		}
		done <- err
	}()
	return cmd, done
}
