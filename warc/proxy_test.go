package warc_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/proxy"
	"github.com/magpiecrawl/magpie/warc"
)

// connectProxy is an HTTP proxy on 127.0.0.1 that serves CONNECT only,
// tunnelling bytes both ways; it counts the tunnels it opened.
type connectProxy struct {
	*httptest.Server
	// mu guards tunnels and conns, the tunnels' connections, which the
	// server's Close does not close (hijacked).
	mu      sync.Mutex
	tunnels int
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	p := &connectProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		p.mu.Lock()
		p.tunnels++
		p.conns = append(p.conns, conn, up)
		p.mu.Unlock()
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		// Each side's copy ends when either connection closes: at the
		// latest when Cleanup closes them.
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(up, buf)
			_ = up.Close()
			_ = conn.Close()
		}()
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(conn, up)
			_ = up.Close()
			_ = conn.Close()
		}()
	}))
	t.Cleanup(func() {
		p.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *connectProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tunnels
}

// tlsSite is a self-signed HTTPS site of five linked pages.
func tlsSite(t *testing.T) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body>", r.URL.Path)
		for i := range 4 {
			fmt.Fprintf(w, `<a href="/p%d">p%d</a> `, i, i)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

// TestHTTPSThroughProxyIsArchived crawls a self-signed HTTPS site through
// a CONNECT proxy, and through two proxies in turn: every exchange
// (robots.txt and five pages) is archived in plaintext with its https URI,
// warcio reads the file (digests and index agree), and each request went
// through the proxy its proxy function chose.
func TestHTTPSThroughProxyIsArchived(t *testing.T) {
	for _, proxies := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d proxies", proxies), func(t *testing.T) {
			srv, pool := tlsSite(t)
			var ps []*connectProxy
			var urls []string
			for range proxies {
				p := newConnectProxy(t)
				ps = append(ps, p)
				urls = append(urls, p.URL)
			}
			dir := t.TempDir()
			w, err := warc.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			c := magpie.NewCollector(w.Option(), magpie.MaxDepth(2))
			c.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})
			if proxies == 1 {
				if err := c.SetProxy(urls[0]); err != nil {
					t.Fatal(err)
				}
			} else {
				rr, err := proxy.RoundRobinProxySwitcher(urls...)
				if err != nil {
					t.Fatal(err)
				}
				c.SetProxyFunc(rr)
			}
			var mu sync.Mutex
			via := map[string]int{}
			c.OnResponse(func(r *magpie.Response) {
				mu.Lock()
				via[r.Request.ProxyURL]++
				mu.Unlock()
			})
			c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			if err := c.Visit(srv.URL + "/"); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for i, p := range ps {
				if p.count() == 0 {
					t.Errorf("proxy %d opened no tunnel", i)
				}
				if proxies > 1 && via[p.URL] == 0 {
					t.Errorf("no response came through proxy %d (%v)", i, via)
				}
			}
			recs := readAll(t, dir)
			for _, path := range []string{"/robots.txt", "/", "/p0", "/p1", "/p2", "/p3"} {
				resp := byURI(recs, "response", srv.URL+path)
				req := byURI(recs, "request", srv.URL+path)
				if len(resp)+len(byURI(recs, "revisit", srv.URL+path)) != 1 || len(req) != 1 {
					t.Errorf("%s: %d response, %d request records, want 1 of each", path, len(resp), len(req))
					continue
				}
				if !strings.HasPrefix(string(req[0].block), "GET "+path+" HTTP/1.1\r\n") {
					t.Errorf("%s: request record is not the plaintext request: %.60q", path, req[0].block)
				}
			}
			if r := byURI(recs, "response", srv.URL+"/p1"); len(r) == 1 && !strings.Contains(string(r[0].block), "<title>Page /p1</title>") {
				t.Errorf("/p1: response record is not the plaintext page: %q", r[0].block)
			}

			tools := warcTools(t)
			files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
			if len(files) != 1 {
				t.Fatalf("files %v, want 1", files)
			}
			var checked struct {
				Counts map[string]int
				Bad    []string
			}
			out := node(t, tools, filepath.Join("testdata", "check.mjs"), files[0])
			if err := json.Unmarshal(out, &checked); err != nil {
				t.Fatalf("check.mjs printed %q: %v", out, err)
			}
			for _, b := range checked.Bad {
				t.Error("warcio:", b)
			}
			if checked.Counts["request"] != 6 {
				t.Errorf("warcio read %v, want 6 request records", checked.Counts)
			}
			cli := filepath.Join(tools, "node_modules", "warcio", "dist", "cli.js")
			theirs := cdxKeys(t, string(node(t, tools, cli, "cdx-index", files[0])))
			data, err := os.ReadFile(strings.TrimSuffix(files[0], ".warc.gz") + ".cdxj")
			if err != nil {
				t.Fatal(err)
			}
			if ours := cdxKeys(t, string(data)); strings.Join(theirs, "\n") != strings.Join(ours, "\n") || len(ours) != 6 {
				t.Errorf("warcio indexes\n%s\nthe Writer's index has\n%s", strings.Join(theirs, "\n"), strings.Join(ours, "\n"))
			}
		})
	}
}

// TestHTTPSThroughSOCKS5IsArchived crawls the HTTPS site through a SOCKS5
// proxy: the page is archived in plaintext.
func TestHTTPSThroughSOCKS5IsArchived(t *testing.T) {
	srv, pool := tlsSite(t)
	socks, n := newSOCKS5(t)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt())
	c.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})
	if err := c.SetProxy("socks5://" + socks); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(srv.URL + "/p2"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n() == 0 {
		t.Error("the SOCKS5 proxy opened no connection")
	}
	recs := readAll(t, dir)
	if r := byURI(recs, "response", srv.URL+"/p2"); len(r) != 1 || !strings.Contains(string(r[0].block), "<title>Page /p2</title>") {
		t.Errorf("response records of /p2: %d, want 1 in plaintext", len(r))
	}
}

// newSOCKS5 starts a SOCKS5 proxy on 127.0.0.1 (no authentication, CONNECT
// only) and returns its address and a count of the connections it opened.
func newSOCKS5(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		n     int
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		br := bufio.NewReader(c)
		hello := make([]byte, 2)
		if _, err := io.ReadFull(br, hello); err != nil || hello[0] != 5 {
			return
		}
		if _, err := io.ReadFull(br, make([]byte, hello[1])); err != nil {
			return
		}
		_, _ = c.Write([]byte{5, 0}) // no authentication
		head := make([]byte, 4)      // VER CMD RSV ATYP
		if _, err := io.ReadFull(br, head); err != nil || head[1] != 1 {
			return
		}
		var host string
		switch head[3] {
		case 1:
			ip := make([]byte, 4)
			if _, err := io.ReadFull(br, ip); err != nil {
				return
			}
			host = net.IP(ip).String()
		case 3:
			l, err := br.ReadByte()
			if err != nil {
				return
			}
			name := make([]byte, l)
			if _, err := io.ReadFull(br, name); err != nil {
				return
			}
			host = string(name)
		default:
			return
		}
		port := make([]byte, 2)
		if _, err := io.ReadFull(br, port); err != nil {
			return
		}
		up, err := net.Dial("tcp", net.JoinHostPort(host, fmt.Sprint(int(port[0])<<8|int(port[1]))))
		if err != nil {
			_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
			return
		}
		track(up)
		mu.Lock()
		n++
		mu.Unlock()
		_, _ = c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(c, up)
			_ = c.Close()
			close(done)
		}()
		_, _ = io.Copy(up, br)
		_ = up.Close()
		<-done
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
