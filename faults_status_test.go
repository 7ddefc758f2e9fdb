package magpie

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// switchingServer answers every request with 101 Switching Protocols (with
// or without the Upgrade headers that make net/http hand the connection
// over) and then keeps the connection open, silent, until the test ends.
func switchingServer(t *testing.T, upgrade bool) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack() error = %v", err)
			return
		}
		defer conn.Close()
		head := "HTTP/1.1 101 Switching Protocols\r\n"
		if upgrade {
			head += "Upgrade: magpie-test\r\nConnection: Upgrade\r\n"
		}
		buf.WriteString(head + "\r\n")
		buf.Flush()
		// Hold the connection until the client closes it or the test ends.
		go func() { _, _ = bufio.NewReader(conn).ReadByte(); conn.Close() }()
		<-release
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv
}

// TestSwitchingProtocolsIsAnError: a GET answered with 101 Switching
// Protocols fails with ErrInformationalResponse (OnError, the Visit error)
// instead of reading the switched connection forever.
func TestSwitchingProtocolsIsAnError(t *testing.T) {
	for _, upgrade := range []bool{true, false} {
		name := "no upgrade headers"
		if upgrade {
			name = "upgrade headers"
		}
		t.Run(name, func(t *testing.T) {
			srv := switchingServer(t, upgrade)
			c := NewCollector(IgnoreRobotsTxt())
			c.SetRequestTimeout(0) // the fix must not rely on the timeout
			errs := make(chan error, 4)
			c.OnError(func(_ *Response, err error) { errs <- err })
			done := make(chan error, 1)
			go func() { done <- c.Visit(srv.URL + "/") }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrInformationalResponse) {
					t.Errorf("Visit() error = %v, want ErrInformationalResponse", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Visit of a 101 response did not return in 30s")
			}
			if err := <-errs; !errors.Is(err, ErrInformationalResponse) {
				t.Errorf("OnError error = %v, want ErrInformationalResponse", err)
			}
			if got := c.Stats().StatusCodes[http.StatusSwitchingProtocols]; got != 1 {
				t.Errorf("Stats().StatusCodes[101] = %d, want 1", got)
			}
		})
	}
}

// blockingBody is a response body whose Read waits until Close, as a
// switched protocol's connection or a careless RoundTripper's body would,
// whatever the request's context says.
type blockingBody struct {
	closed chan struct{}
	once   sync.Once
}

func (b *blockingBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, net.ErrClosed
}

func (b *blockingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

type blockingBodyTransport struct{ reading chan struct{} }

func (tr blockingBodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case tr.reading <- struct{}{}:
	default:
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: &blockingBody{closed: make(chan struct{})},
		ContentLength: -1, Request: r,
	}, nil
}

// TestStopClosesBodyThatIgnoresContext: Stop returns while a download reads a
// body that ignores the request's context, because the body is closed
// when the context ends.
func TestStopClosesBodyThatIgnoresContext(t *testing.T) {
	c := NewCollector(IgnoreRobotsTxt(), Async())
	c.SetRequestTimeout(0)
	tr := blockingBodyTransport{reading: make(chan struct{}, 1)}
	c.WithTransport(tr)
	stopWhileReading(t, c, "http://stuck.test/", tr.reading)
}

// stopWhileReading visits u with c, waits until its body is being read
// (reading), then Stops c: Stop and Wait must return within 30 s although
// the read blocks.
func stopWhileReading(t *testing.T, c *Collector, u string, reading <-chan struct{}) {
	t.Helper()
	if err := c.Visit(u); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	select {
	case <-reading:
	case <-time.After(30 * time.Second):
		t.Fatal("request not sent in 30s")
	}
	stopped := make(chan struct{})
	go func() { c.Stop(); c.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatalf("Stop did not return in 30s while the body read of %s ignored the context", u)
	}
}
