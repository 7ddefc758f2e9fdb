package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// heldSite serves / linking to /p/0 … /p/n-1, which wait until the
// request ends (the crawl stopping cancels them): a crawl of it runs
// until it is stopped.
func heldSite(t *testing.T, n int) *pagesSite {
	return newPagesSite(t, n, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/p/") {
				<-r.Context().Done()
				return
			}
			h.ServeHTTP(w, r)
		})
	})
}

// startUI runs magpie crawl with args and returns the live page's URL as
// printed, the command, and a function that waits for its result.
func startUI(t *testing.T, args ...string) (string, func() result) {
	t.Helper()
	cmd := cliCommand(t, "", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			stderr.WriteString(line + "\n")
			if u, ok := strings.CutPrefix(line, "live page on "); ok {
				found <- u
			}
		}
	}()
	var waited bool
	wait := func() result {
		waited = true
		<-copied
		return exitResult(t, cmd.Wait(), &stdout, &stderr)
	}
	// A test that fails before it waits says what the crawl printed.
	t.Cleanup(func() {
		if waited || !t.Failed() {
			return
		}
		cmd.Process.Kill()
		<-copied
		cmd.Wait()
		t.Logf("magpie's stderr:\n%s", stderr.String())
	})
	select {
	case u := <-found:
		return u, wait
	case <-copied:
		r := wait()
		t.Fatalf("magpie exited (%d) without a live page:\n%s", r.code, r.stderr)
	case <-time.After(time.Minute):
		t.Fatal("no live page printed")
	}
	return "", nil
}

// pageDo sends a request to the live page, with tok when set.
func pageDo(t *testing.T, method, u, tok string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("X-Magpie-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitResponses reads the page's event stream until the crawl has n
// responses and work pending, or fails the test at the deadline.
func waitResponses(t *testing.T, base, tok string, n uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Magpie-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var snap struct {
			Stats struct {
				Responses uint32 `json:"responses"`
				Pending   int    `json:"pending"`
			} `json:"stats"`
		}
		if err := json.Unmarshal([]byte(d), &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Stats.Responses >= n && snap.Stats.Pending > 0 {
			return
		}
	}
	t.Fatalf("the crawl did not reach %d responses: %v", n, sc.Err())
}

// TestCLIUIStop: magpie crawl --ui serves the live page on loopback
// without a token; its Stop ends the crawl with the output finished (-o
// renamed into place, the pages fetched written), exit status 0.
func TestCLIUIStop(t *testing.T) {
	s := heldSite(t, 3)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	page, wait := startUI(t, "crawl", s.URL+"/", "--ui", "127.0.0.1:0", "--allow-loopback", "-o", out, "-q")
	if !strings.HasPrefix(page, "http://127.0.0.1:") || strings.Contains(page, "token") {
		t.Errorf("live page URL %q, want loopback without a token", page)
	}
	waitResponses(t, page, "", 1)
	if code, body := pageDo(t, "GET", page, ""); code != 200 || !strings.Contains(body, "magpie") {
		t.Errorf("GET / = %d", code)
	}
	if code, body := pageDo(t, "POST", page+"api/stop", ""); code != 200 {
		t.Fatalf("POST /api/stop = %d %s", code, body)
	}
	r := wait()
	if r.code != 0 || !strings.Contains(r.stderr, "stopped from the live page") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("-o not finished: %v", err)
	}
	if got := urlsOf(jsonLines(t, string(data))); got[s.URL+"/"] != 1 || len(got) != 1 {
		t.Errorf("output %v, want the home page", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestCLIUIToken: --ui on every interface gets a random token, printed in
// the page's URL; without it the page answers 403 and the crawl goes on;
// --ui-token sets it.
func TestCLIUIToken(t *testing.T) {
	for _, given := range []string{"", "my-token"} {
		t.Run(fmt.Sprintf("token=%q", given), func(t *testing.T) {
			s := heldSite(t, 2)
			args := []string{"crawl", s.URL + "/", "--ui", "0.0.0.0:0", "--allow-loopback", "-q", "-o", filepath.Join(t.TempDir(), "o.jsonl")}
			if given != "" {
				args = append(args, "--ui-token", given)
			}
			page, wait := startUI(t, args...)
			_, tok, ok := strings.Cut(page, "?token=")
			if !ok || tok == "" || (given != "" && tok != given) {
				t.Fatalf("live page URL %q: want a token (%q)", page, given)
			}
			_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(strings.Split(page, "?")[0], "http://"), "/"))
			base := "http://127.0.0.1:" + port + "/"
			waitResponses(t, base, tok, 1)
			if code, _ := pageDo(t, "POST", base+"api/stop", ""); code != 403 {
				t.Errorf("POST /api/stop without the token = %d, want 403", code)
			}
			if code, _ := pageDo(t, "POST", base+"api/stop", "wrong"); code != 403 {
				t.Errorf("POST /api/stop with a wrong token = %d, want 403", code)
			}
			if code, _ := pageDo(t, "GET", base+"api/stats", tok); code != 200 {
				t.Errorf("the crawl stopped, or the token is refused: GET = %d", code)
			}
			if code, _ := pageDo(t, "POST", base+"api/stop", tok); code != 200 {
				t.Errorf("POST /api/stop with the token = %d", code)
			}
			if r := wait(); r.code != 0 {
				t.Errorf("exit %d:\n%s", r.code, r.stderr)
			}
		})
	}
}

// TestCLIUIAddressTaken: a --ui address that is taken is a usage error
// before the crawl starts (nothing is fetched); so are a malformed one and
// --ui-token without --ui.
func TestCLIUIAddressTaken(t *testing.T) {
	s := heldSite(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ui", ln.Addr().String()}, "address already in use"},
		{[]string{"--ui", "no-port"}, "want HOST:PORT or PORT"},
		{[]string{"--ui-token", "x"}, "--ui-token needs --ui"},
	} {
		r := cli(t, "", append([]string{"crawl", s.URL + "/", "--allow-loopback"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error saying %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := s.hitCount("/"); n != 0 {
		t.Errorf("the site got %d requests", n)
	}
}

// closeSignal is a listener that says when it is closed.
type closeSignal struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeSignal) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// TestUIStopAnswered: the page's Stop ends the crawl, whose end closes the
// page's server while the Stop request is still being answered; that
// request gets its answer. Here the stop waits until the server has begun
// to close (its listener is closed) before it returns, as a crawl that
// ends at once does.
func TestUIStopAnswered(t *testing.T) {
	u, err := uiFlags{addr: "127.0.0.1:0"}.listen()
	if err != nil {
		t.Fatal(err)
	}
	ln := &closeSignal{Listener: u.ln, closed: make(chan struct{})}
	u.ln = ln
	closed := make(chan struct{})
	stop := func() error {
		go func() {
			u.close()
			close(closed)
		}()
		<-ln.closed
		return nil
	}
	u.start(magpie.NewCollector(), stop, io.Discard)
	base := "http://" + ln.Addr().String() + "/"
	if code, body := pageDo(t, "POST", base+"api/stop", ""); code != 200 {
		t.Errorf("POST /api/stop = %d %s, want 200", code, body)
	}
	<-closed
}
