package magpie_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// The nginx recrawl tests need nginx (Debian's package) and the PostgreSQL
// manual (postgresql-doc). CI sets MAGPIE_REQUIRE_NGINX=1, which makes
// their absence a failure; elsewhere the tests skip.

// pgManual returns the PostgreSQL manual's HTML directory.
func pgManual(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/share/doc/postgresql-doc-*/html")
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
	}
	_, nerr := os.Stat(nginx)
	if len(dirs) == 0 || nerr != nil {
		if os.Getenv("MAGPIE_REQUIRE_NGINX") == "1" {
			t.Fatalf("MAGPIE_REQUIRE_NGINX=1 but nginx (%v) or /usr/share/doc/postgresql-doc-*/html (%d found) is missing", nerr, len(dirs))
		}
		t.Skip("nginx or postgresql-doc not installed; set MAGPIE_REQUIRE_NGINX=1 to require them")
	}
	return dirs[len(dirs)-1]
}

// startNginx serves root on a free loopback port with a temporary config
// and returns its base URL; it stops nginx at cleanup. validators false
// turns ETag and If-Modified-Since off.
func startNginx(t *testing.T, root string, validators bool) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	v := "etag on; if_modified_since exact;"
	if !validators {
		v = "etag off; if_modified_since off;"
	}
	user := ""
	if os.Geteuid() == 0 {
		// As root nginx's workers would run as nobody, who cannot read
		// the test's 0700 temporary directories.
		user = "user root;"
	}
	conf := fmt.Sprintf(`%[5]s
worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	types { text/html html; text/css css; }
	server {
		listen %[2]s;
		root %[3]s;
		%[4]s
	}
}
`, dir, addr, root, v, user)
	cfg := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", cfg, "-e", filepath.Join(dir, "error.log"))
	dieWithTest(cmd)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// TERM, not KILL: the master stops its workers, which would
		// otherwise hold the output pipe (and Wait) open.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", err, out, log)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within 10s", addr)
		}
	}
}

// copyTree copies the regular files of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() && e.Type()&os.ModeSymlink == 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			continue // a dangling symlink
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// crawlResult is one crawl's outcome per page path.
type crawlResult struct {
	changes map[string]magpie.Change
	stats   magpie.Stats
	wall    time.Duration
}

// crawlSite crawls base from index.html over store, following links.
func crawlSite(t *testing.T, base string, store storage.Storage) crawlResult {
	t.Helper()
	c := magpie.NewCollector(magpie.Async(true), magpie.Recrawl(magpie.RecrawlPolicy{}), magpie.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		magpie.AllowedDomains(strings.TrimPrefix(base, "http://")[:strings.LastIndex(strings.TrimPrefix(base, "http://"), ":")]))
	if err := c.SetStorage(store); err != nil {
		t.Fatal(err)
	}
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 8}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	res := crawlResult{changes: map[string]magpie.Change{}}
	note := func(r *magpie.Response) {
		mu.Lock()
		defer mu.Unlock()
		res.changes[strings.TrimPrefix(r.Request.URL.Path, "/")] = r.Change
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		if h := e.Attr("href"); strings.HasSuffix(strings.SplitN(h, "#", 2)[0], ".html") {
			_ = e.Request.Visit(h)
		}
	})
	c.OnScraped(note)
	c.OnError(func(r *magpie.Response, err error) {
		if r.Change != magpie.ChangeGone {
			t.Errorf("OnError(%s): %v (Change %q)", r.Request.URL, err, r.Change)
		}
		note(r)
	})
	began := time.Now()
	if err := c.Visit(base + "/index.html"); err != nil {
		t.Fatalf("Visit(index.html) error = %v", err)
	}
	c.Wait()
	res.wall, res.stats = time.Since(began), c.Stats()
	return res
}

// nginxRecrawl crawls a copy of the manual, changes 20 pages, deletes 5,
// adds 5 linked from a changed one, and recrawls over the same store
// (open gives it, twice: a durable store is closed and opened again).
func nginxRecrawl(t *testing.T, validators bool, open func(t *testing.T) (storage.Storage, func())) {
	root := t.TempDir()
	copyTree(t, pgManual(t), root)
	base := startNginx(t, root, validators)

	st, done := open(t)
	first := crawlSite(t, base, st)
	done()
	pages := slices.Sorted(func(yield func(string) bool) {
		for p := range first.changes {
			if p != "index.html" && !yield(p) {
				return
			}
		}
	})
	if len(pages) < 500 {
		t.Fatalf("first crawl reached %d pages, want the manual's (> 500)", len(pages))
	}
	for p, ch := range first.changes {
		if ch != magpie.ChangeNew {
			t.Fatalf("first crawl: %s Change %q, want new", p, ch)
		}
	}
	rng := rand.New(rand.NewPCG(30, uint64(len(pages))))
	rng.Shuffle(len(pages), func(i, j int) { pages[i], pages[j] = pages[j], pages[i] })
	changed, deleted := pages[:20], pages[20:25]
	var added []string
	for i := range 5 {
		added = append(added, fmt.Sprintf("recrawl-new-%d.html", i))
	}
	for i, p := range changed {
		extra := fmt.Sprintf("\n<!-- edited %d -->\n", i)
		if i == 0 {
			for _, a := range added {
				extra += `<a href="` + a + `">new</a>`
				if err := os.WriteFile(filepath.Join(root, a), []byte("<html><body>new page "+a+"</body></html>"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		f, err := os.OpenFile(filepath.Join(root, p), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(extra); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, p := range deleted {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}

	st, done = open(t)
	second := crawlSite(t, base, st)
	done()
	want := map[string]magpie.Change{}
	for p := range first.changes {
		want[p] = magpie.ChangeUnchanged
	}
	for _, p := range changed {
		want[p] = magpie.ChangeChanged
	}
	for _, p := range deleted {
		want[p] = magpie.ChangeGone
	}
	for _, p := range added {
		want[p] = magpie.ChangeNew
	}
	var wrong []string
	for p, w := range want {
		if second.changes[p] != w {
			wrong = append(wrong, fmt.Sprintf("%s: %q want %q", p, second.changes[p], w))
		}
	}
	for p := range second.changes {
		if _, ok := want[p]; !ok {
			wrong = append(wrong, p+": fetched, want not")
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		t.Errorf("second crawl: %d pages judged wrong, e.g. %v", len(wrong), wrong[:min(len(wrong), 10)])
	}
	wantStats := magpie.RecrawlStats{New: 5, Changed: 20, Gone: 5, Unchanged: uint64(len(first.changes) - 25)}
	if second.stats.Recrawl != wantStats {
		t.Errorf("second crawl Stats.Recrawl = %+v, want %+v", second.stats.Recrawl, wantStats)
	}
	ratio := float64(second.stats.Bytes) / float64(first.stats.Bytes)
	if validators && ratio > 0.05 {
		t.Errorf("second crawl downloaded %d body bytes, %.1f%% of the first's %d; want <= 5%%", second.stats.Bytes, 100*ratio, first.stats.Bytes)
	}
	t.Logf("pages %d; first crawl %v, %d bytes; recrawl %v, %d bytes (%.2f%%); %+v",
		len(first.changes), first.wall.Round(time.Millisecond), first.stats.Bytes, second.wall.Round(time.Millisecond),
		second.stats.Bytes, 100*ratio, second.stats.Recrawl)
}

// TestNginxRecrawl: issue 30's measured scenario on every store, with
// nginx's validators and, on memory, without them (digests).
func TestNginxRecrawl(t *testing.T) {
	mem := func(*testing.T) func(*testing.T) (storage.Storage, func()) {
		st := &storage.InMemoryStorage{}
		return func(*testing.T) (storage.Storage, func()) { return st, func() {} }
	}
	sqlite := func(t *testing.T) func(*testing.T) (storage.Storage, func()) {
		path := filepath.Join(t.TempDir(), "st.db")
		return func(t *testing.T) (storage.Storage, func()) {
			s, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return s, func() { s.Close() }
		}
	}
	redis := func(t *testing.T) func(*testing.T) (storage.Storage, func()) {
		addr := os.Getenv("MAGPIE_REDIS_ADDR")
		if addr == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("redis-server required in CI: set MAGPIE_REDIS_ADDR")
			}
			t.Skip("MAGPIE_REDIS_ADDR is not set")
		}
		prefix := fmt.Sprintf("recrawl-nginx-%d", rand.Uint64())
		t.Cleanup(func() {
			if s, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: prefix}); err == nil {
				_ = s.Clear(context.Background())
				s.Close()
			}
		})
		return func(t *testing.T) (storage.Storage, func()) {
			s, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			return s, func() { s.Close() }
		}
	}
	for _, tc := range []struct {
		name       string
		validators bool
		store      func(*testing.T) func(*testing.T) (storage.Storage, func())
	}{
		{"memory", true, mem},
		{"memory-digest", false, mem},
		{"sqlite", true, sqlite},
		{"redis", true, redis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgManual(t)
			nginxRecrawl(t, tc.validators, tc.store(t))
		})
	}
}
