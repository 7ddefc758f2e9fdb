package magpie

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// Archiver receives every HTTP exchange the Collector makes, as it crossed
// the wire: the request as written and the response as read, with their
// status line, headers and body bytes untouched (chunked framing and content
// encodings as they came). Pages, redirect hops, CheckHead requests,
// robots.txt fetches and error statuses all reach it. Package
// github.com/magpiecrawl/magpie/warc writes them to WARC files.
//
// ArchiveExchange is called from download workers, many at once, after the
// response's body was closed; it must be safe for concurrent use, must not
// call back into the Collector, and must not keep x or read it after
// returning. An error it returns is logged at Warn; the crawl goes on.
type Archiver interface {
	ArchiveExchange(x *WireExchange) error
}

// FetchArchiver is an optional interface of an Archiver: it is also given
// each page a Fetcher downloaded (render's DOM after scripts ran), which
// never crosses the collector's transport. It is called from the download
// worker once Fetch returned a result, with the request the Fetcher was
// given and the moment it was asked; the same rules as ArchiveExchange hold.
type FetchArchiver interface {
	ArchiveFetched(fr *FetchRequest, res *FetchResult, date time.Time) error
}

// archiveFetched hands a Fetcher's result to the Archiver, if it takes them.
func (c *Collector) archiveFetched(fr *FetchRequest, res *FetchResult, date time.Time) {
	b := c.shared.backend
	b.mu.RLock()
	a, _ := b.archiver.(FetchArchiver)
	b.mu.RUnlock()
	if a == nil {
		return
	}
	if err := a.ArchiveFetched(fr, res, date); err != nil {
		c.logger.Warn("archiving a fetched page", "url", fr.URL.Redacted(), "err", err)
	}
}

// WithArchiver hands every exchange of the collector and its clones to a.
// To see the bytes on the wire, magpie wraps the connections its
// *http.Transport dials: it speaks HTTP/1.1 only (no HTTP/2) and makes the TLS
// handshake itself. HTTPS through a proxy (Transport.Proxy: http, https,
// socks5 or socks5h) is seen too: magpie opens the tunnel itself (CONNECT,
// with the transport's ProxyConnectHeader, GetProxyConnectHeader and
// OnProxyConnectResponse, or SOCKS5) and makes the TLS handshake inside it,
// keeping one pool of connections per proxy as the transport does; the
// proxy function is then asked once per request, and an HTTPS redirect hop
// goes through the proxy its request was given. Exchanges sent through a
// RoundTripper that is not an *http.Transport are not seen: each is logged
// at Warn ("exchange not archived"). Pages a Fetcher downloads reach an
// Archiver that is also a FetchArchiver. Set it before the crawl starts; nil
// turns archiving off.
func WithArchiver(a Archiver) CollectorOption {
	return func(c *Collector) { c.shared.backend.setArchiver(a) }
}

// WireExchange is one request and its response on a connection. It is only
// valid during the ArchiveExchange call it is passed to.
type WireExchange struct {
	// Scheme is "http" or "https" (the bytes are the plaintext inside TLS).
	Scheme string
	// RemoteAddr is the IP address of the server (or proxy) the connection reached.
	RemoteAddr string
	// Date is when the connection was handed to the request, before any of
	// its bytes were written.
	Date time.Time
	// Request is the request as written: request line, headers and body.
	Request *WireBytes
	// Response is the response as read: status line, headers and body up
	// to where the Collector stopped reading (MaxBodySize cuts it short;
	// compare its length with the headers to tell).
	Response *WireBytes

	// Original is, for a page a recrawl (Recrawl) fetches again, the
	// capture of its last full answer, as an Archiver reported it in
	// Archived then (zero when none is known): what the record of a 304
	// answer refers to, and whose payload it stands for.
	Original storage.Capture
	// Archived is for the Archiver to set during ArchiveExchange: the
	// record that holds this response's payload (its own, or the earlier
	// identical one its record refers to; for a 304, Original). A recrawl
	// keeps it in the page's state, to hand it back as Original with the
	// page's next fetch.
	Archived storage.Capture
}

// archiveMemLimit is how many bytes of one message are kept in memory;
// beyond it the message goes to a temporary file.
const archiveMemLimit = 1 << 20

// WireBytes holds one recorded message, in memory while small and in an
// unlinked temporary file beyond that. Its zero value is empty.
type WireBytes struct {
	mem  []byte
	file *os.File
	size int64
	err  error
}

// Len returns the number of bytes recorded.
func (w *WireBytes) Len() int64 { return w.size }

// Err returns the error that stopped the recording (a temporary file that
// could not be written), or nil: the message is then complete as read.
func (w *WireBytes) Err() error { return w.err }

// NewReader returns a reader of the recorded bytes from the start; each call
// returns a new, independent reader.
func (w *WireBytes) NewReader() io.Reader {
	if w.file != nil {
		return io.NewSectionReader(w.file, 0, w.size)
	}
	return bytes.NewReader(w.mem)
}

func (w *WireBytes) write(p []byte) {
	if w.err != nil {
		return
	}
	if w.file == nil && int64(len(w.mem)+len(p)) > archiveMemLimit {
		f, err := os.CreateTemp("", "magpie-wire-*")
		if err != nil {
			w.err = err
			return
		}
		_ = os.Remove(f.Name()) // unlinked: nothing is left behind, even by a crash
		w.file = f
		if _, err := f.Write(w.mem); err != nil {
			w.err = err
			return
		}
		w.mem = nil
	}
	if w.file != nil {
		if _, err := w.file.Write(p); err != nil {
			w.err = err
			return
		}
	} else {
		if w.mem == nil {
			w.mem = (*wireBufs.Get().(*[]byte))[:0]
		}
		w.mem = append(w.mem, p...)
	}
	w.size += int64(len(p))
}

// wireBufs holds the buffers of recorded messages, so that a crawl does not
// allocate and grow two per exchange.
var wireBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func (w *WireBytes) release() {
	if w.file != nil {
		_ = w.file.Close()
	}
	if w.mem != nil && cap(w.mem) <= archiveMemLimit {
		b := w.mem[:0]
		wireBufs.Put(&b)
	}
	w.mem, w.file = nil, nil
}

// recordConn is a connection whose bytes are copied to the exchange it is
// serving.
type recordConn struct {
	net.Conn
	scheme string
	// mu guards turn, the exchange the connection serves now (nil: none);
	// the transport reads and writes from two goroutines.
	mu   sync.Mutex
	turn *WireExchange
}

func (c *recordConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.turn != nil {
			c.turn.Response.write(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *recordConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.mu.Lock()
		if c.turn != nil {
			c.turn.Request.write(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

// begin makes the connection record into a new exchange.
func (c *recordConn) begin() *WireExchange {
	x := &WireExchange{Scheme: c.scheme, Date: time.Now(), Request: &WireBytes{}, Response: &WireBytes{}}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		x.RemoteAddr = ta.IP.String()
	} else if h, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		x.RemoteAddr = h
	}
	c.mu.Lock()
	c.turn = x
	c.mu.Unlock()
	return x
}

// end stops recording into x.
func (c *recordConn) end(x *WireExchange) {
	c.mu.Lock()
	if c.turn == x {
		c.turn = nil
	}
	c.mu.Unlock()
}

// archiveMark, a key of TLSNextProto that no server negotiates, marks a
// transport whose dials record (a clone keeps it, and with it the dials).
const archiveMark = "magpie-archive"

// archiveTransport returns a clone of t whose connections record, speaking
// HTTP/1.1 only; t itself when it records already.
func archiveTransport(t *http.Transport) *http.Transport {
	if _, ok := t.TLSNextProto[archiveMark]; ok {
		return t
	}
	t = t.Clone()
	plain, userTLS := t.DialContext, t.DialTLSContext
	if plain == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		plain = d.DialContext
	}
	// A non-nil TLSNextProto without "h2" keeps HTTP/2 off.
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{archiveMark: nil}
	cfg := t.TLSClientConfig
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &recordConn{Conn: conn, scheme: "http"}, nil
	}
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if userTLS != nil {
			// The user's TLS dial: its connection carries plaintext.
			conn, err := userTLS(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &recordConn{Conn: conn, scheme: "https"}, nil
		}
		raw, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = ""
		}
		return recordTLS(ctx, raw, cfg, host)
	}
	return t
}

// recordTLS makes the TLS handshake with host over raw, itself and for
// HTTP/1.1 only, so that the bytes recorded are those above TLS: the
// exchange as it crossed the wire, readable. cfg (nil: the defaults) is
// cloned; raw is closed when the handshake fails.
func recordTLS(ctx context.Context, raw net.Conn, cfg *tls.Config, host string) (net.Conn, error) {
	c := &tls.Config{}
	if cfg != nil {
		c = cfg.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.NextProtos = []string{"http/1.1"}
	tc := tls.Client(raw, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return &recordConn{Conn: tc, scheme: "https"}, nil
}

// setArchiver sets (nil: removes) the Archiver and wraps the transport.
func (b *httpBackend) setArchiver(a Archiver) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.archiver, b.guarded = a, nil
	b.applyGuard()
}

// archiveSession follows one client.Do through its redirect hops: each hop
// is an exchange on the connection the transport handed it.
type archiveSession struct {
	a   Archiver
	c   *Collector
	url *url.URL
	// ref, in a recrawl, is the capture the request's 304 refers to and
	// takes the one its final response was archived as.
	ref    *archiveRef
	closed sync.Once
	// mu guards hops, cur and missed.
	mu   sync.Mutex
	hops []*WireExchange
	cur  *recordConn
	// missed counts the hops on a connection magpie did not dial (a
	// RoundTripper of the user's), which are not recorded.
	missed int
}

func (s *archiveSession) gotConn(info httptrace.GotConnInfo) {
	rc, _ := info.Conn.(*recordConn)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endHop()
	if rc == nil {
		s.missed++ // not a connection magpie dialled
		return
	}
	s.cur = rc
	s.hops = append(s.hops, rc.begin())
}

// endHop stops the current hop's recording; called under mu.
func (s *archiveSession) endHop() {
	if s.cur != nil && len(s.hops) > 0 {
		s.cur.end(s.hops[len(s.hops)-1])
	}
	s.cur = nil
}

// finish hands every recorded hop to the Archiver, once. answered says
// whether a response arrived: a response without any recorded hop came
// through a connection magpie did not dial, and is logged as not archived.
func (s *archiveSession) finish(answered bool) {
	s.closed.Do(func() {
		s.mu.Lock()
		s.endHop()
		hops, missed := s.hops, s.missed
		s.hops = nil
		s.mu.Unlock()
		if missed == 0 && answered && len(hops) == 0 {
			missed = 1 // a RoundTripper that reported no connection
		}
		if missed > 0 {
			s.c.logger.Warn("exchange not archived: sent through a RoundTripper that is not an *http.Transport", "url", s.url.Redacted(), "exchanges", missed)
		}
		for i, x := range hops {
			if x.Request.Len() > 0 && x.Response.Len() > 0 {
				if s.ref != nil {
					x.Original = s.ref.original
				}
				if err := s.a.ArchiveExchange(x); err != nil {
					s.c.logger.Warn("archiving an exchange", "err", err)
				} else if s.ref != nil && i == len(hops)-1 {
					s.ref.setArchived(x.Archived)
				}
			}
			x.Request.release()
			x.Response.release()
		}
	})
}

// archivedBody archives the exchange once the response body is closed.
type archivedBody struct {
	io.ReadCloser
	s *archiveSession
}

func (b *archivedBody) Close() error {
	err := b.ReadCloser.Close()
	b.s.finish(true)
	return err
}

// do sends hreq with the collector's client; with an Archiver, its exchanges
// (redirect hops included) are archived when the response body is closed, or
// at once when there is no response.
func (c *Collector) do(hreq *http.Request) (*http.Response, error) {
	res, _, err := c.doOn(hreq)
	return res, err
}

// doOn is do, reporting too whether the client's transport is net/http's
// own (an *http.Transport), whose http and https bodies stop reading when
// the request's context ends.
func (c *Collector) doOn(hreq *http.Request) (_ *http.Response, std bool, _ error) {
	b := c.shared.backend
	b.mu.RLock()
	client, a := b.client, b.archiver
	b.mu.RUnlock()
	switch client.Transport.(type) {
	case nil, *http.Transport:
		std = true
	}
	if a == nil {
		res, err := client.Do(hreq)
		return res, std, err
	}
	s := &archiveSession{a: a, c: c, url: hreq.URL}
	s.ref, _ = hreq.Context().Value(archiveRefKey{}).(*archiveRef)
	hreq = hreq.WithContext(httptrace.WithClientTrace(hreq.Context(), &httptrace.ClientTrace{GotConn: s.gotConn}))
	client, err := b.tunnels.through(client, hreq)
	if err != nil {
		return nil, std, err
	}
	res, err := client.Do(hreq)
	if err != nil {
		s.finish(false)
		return res, std, err
	}
	res.Body = &archivedBody{ReadCloser: res.Body, s: s}
	return res, std, nil
}

// archiveRef carries a recrawled page's captures between its recrawl state
// and the Archiver: the capture its 304 refers to, read from the state, and
// the one its response was archived as, for the new state.
type archiveRef struct {
	original storage.Capture
	// mu guards archived: the response body, whose Close archives, may be
	// closed by the context's AfterFunc.
	mu       sync.Mutex
	archived storage.Capture
}

// archiveRefKey keys the *archiveRef in a fetch's context.
type archiveRefKey struct{}

// withArchiveRef returns ctx carrying a new archiveRef for a page whose
// last full answer was archived as original, when the collector archives;
// ctx and nil when it does not.
func (c *Collector) withArchiveRef(ctx context.Context, original storage.Capture) (context.Context, *archiveRef) {
	b := c.shared.backend
	b.mu.RLock()
	a := b.archiver
	b.mu.RUnlock()
	if a == nil {
		return ctx, nil
	}
	ref := &archiveRef{original: original}
	return context.WithValue(ctx, archiveRefKey{}, ref), ref
}

func (r *archiveRef) setArchived(c storage.Capture) {
	r.mu.Lock()
	r.archived = c
	r.mu.Unlock()
}

// capture returns the capture the response was archived as (zero when
// nothing was archived, or r is nil).
func (r *archiveRef) capture() storage.Capture {
	if r == nil {
		return storage.Capture{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.archived
}
