package magpie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
)

// TestDenyPrivateNetworksDialPaths: the guard covers every way an
// *http.Transport dials. A dialer of the user's (DialContext, Dial,
// DialTLSContext) is kept, not replaced, and the connection it returns is
// checked before any HTTP byte (a dialer that tunnels to a proxy or relay on
// loopback is refused unless that address is allowed); a target given as an
// IP literal is refused before the user's dialer is called.
func TestDenyPrivateNetworksDialPaths(t *testing.T) {
	var hits atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal")
	})
	plainSrv := httptest.NewServer(handler)
	defer plainSrv.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	tlsConfig := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()

	type setup struct {
		transport func(dials *atomic.Int32) http.RoundTripper
		url       string
		allow     []netip.Prefix
		wantErr   bool
		noDial    bool // refused before the dialer is called
	}
	var d net.Dialer
	// Each dialer stands for a custom resolver, a SOCKS or mesh dialer:
	// whatever name it is asked for, it connects to the server on loopback.
	userDial := func(dials *atomic.Int32, to string) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, to)
		}
	}
	tlsDial := func(dials *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			cfg := tlsConfig.Clone()
			cfg.ServerName = "example.com" // in httptest's certificate
			td := &tls.Dialer{Config: cfg}
			return td.DialContext(ctx, network, tlsSrv.Listener.Addr().String())
		}
	}
	plainAddr := plainSrv.Listener.Addr().String()
	tlsURL := "https://example.com/"
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	tests := map[string]setup{
		"DialTLSContext (uTLS, client certificates)": {
			transport: func(n *atomic.Int32) http.RoundTripper { return &http.Transport{DialTLSContext: tlsDial(n)} },
			url:       tlsURL, wantErr: true,
		},
		"DialTLSContext allowed": {
			transport: func(n *atomic.Int32) http.RoundTripper { return &http.Transport{DialTLSContext: tlsDial(n)} },
			url:       tlsURL, allow: loopback,
		},
		"DialContext of the user's": {
			transport: func(n *atomic.Int32) http.RoundTripper {
				return &http.Transport{DialContext: userDial(n, plainAddr)}
			},
			url: "http://internal.example/", wantErr: true,
		},
		"DialContext of the user's, allowed": {
			transport: func(n *atomic.Int32) http.RoundTripper {
				return &http.Transport{DialContext: userDial(n, plainAddr)}
			},
			url: "http://internal.example/", allow: loopback,
		},
		"deprecated Dial": {
			transport: func(n *atomic.Int32) http.RoundTripper {
				dial := userDial(n, plainAddr)
				//lint:ignore SA1019 the deprecated Dial is a dial path users still set
				return &http.Transport{Dial: func(network, addr string) (net.Conn, error) {
					return dial(context.Background(), network, addr)
				}}
			},
			url: "http://internal.example/", wantErr: true,
		},
		"IP literal refused before the user's dialer": {
			transport: func(n *atomic.Int32) http.RoundTripper {
				return &http.Transport{DialContext: userDial(n, plainAddr)}
			},
			url: plainSrv.URL + "/", wantErr: true, noDial: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hits.Store(0)
			var dials atomic.Int32
			c := NewCollector(DenyPrivateNetworks(tc.allow...), IgnoreRobotsTxt())
			c.WithTransport(tc.transport(&dials))
			err := c.Visit(tc.url)
			if tc.wantErr {
				if !errors.Is(err, ErrPrivateNetwork) {
					t.Errorf("Visit(%q) error = %v, want ErrPrivateNetwork", tc.url, err)
				}
				if n := hits.Load(); n != 0 {
					t.Errorf("the refused server answered %d HTTP requests, want 0", n)
				}
			} else if err != nil || hits.Load() != 1 {
				t.Errorf("Visit(%q) error = %v, %d requests served; want nil and 1", tc.url, err, hits.Load())
			}
			if n := dials.Load(); tc.noDial && n != 0 {
				t.Errorf("the user's dialer was called %d times for a refused IP literal, want 0", n)
			} else if !tc.noDial && n == 0 {
				t.Error("the user's dialer was never called: it was replaced")
			}
		})
	}

	t.Run("a connection without an IP remote address", func(t *testing.T) {
		c := NewCollector(DenyPrivateNetworks(), IgnoreRobotsTxt())
		var dials atomic.Int32
		c.WithTransport(&http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			client, server := net.Pipe()
			server.Close()
			return client, nil
		}})
		if err := c.Visit("http://mesh.example/"); !errors.Is(err, ErrPrivateNetwork) || dials.Load() == 0 {
			t.Errorf("Visit over a pipe error = %v after %d dials, want ErrPrivateNetwork from the user's dialer", err, dials.Load())
		}
	})
	t.Run("SetClient with a nil Transport", func(t *testing.T) {
		hits.Store(0)
		c := NewCollector(DenyPrivateNetworks(), IgnoreRobotsTxt())
		c.SetClient(&http.Client{})
		if err := c.Visit(plainSrv.URL + "/"); !errors.Is(err, ErrPrivateNetwork) || hits.Load() != 0 {
			t.Errorf("Visit after SetClient error = %v, %d served; want ErrPrivateNetwork and 0", err, hits.Load())
		}
	})
}

// TestNetGuardEmbeddedIPv4: IPv6 addresses that carry a refused IPv4 address
// (NAT64, IPv4-compatible, IPv4-mapped, 6to4, Teredo, IPv4-translated) are
// refused; those that carry a public one are not.
func TestNetGuardEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		addr    string
		refused bool
	}{
		{"[64:ff9b::a9fe:a9fe]:80", true},                   // NAT64 of 169.254.169.254
		{"[64:ff9b::7f00:1]:80", true},                      // NAT64 of 127.0.0.1
		{"[64:ff9b::a00:1]:80", true},                       // NAT64 of 10.0.0.1
		{"[::a9fe:a9fe]:80", true},                          // IPv4-compatible 169.254.169.254
		{"[::7f00:1]:80", true},                             // IPv4-compatible 127.0.0.1
		{"[::ffff:169.254.169.254]:80", true},               // IPv4-mapped
		{"[::ffff:0:a9fe:a9fe]:80", true},                   // IPv4-translated
		{"[2002:a9fe:a9fe::1]:80", true},                    // 6to4 of 169.254.169.254
		{"[2002:c0a8:101::1]:80", true},                     // 6to4 of 192.168.1.1
		{"[2001:0:4136:e378:8000:63bf:80ff:fffe]:80", true}, // Teredo, client 127.0.0.1
		{"[2001:0:a00:1:8000:63bf:f7f7:f7f7]:80", true},     // Teredo, server 10.0.0.1
		{"[64:ff9b:1::a9fe:a9fe]:80", true},                 // local-use NAT64
		{"[64:ff9b::808:808]:80", false},                    // NAT64 of 8.8.8.8
		{"[2002:808:808::1]:80", false},                     // 6to4 of 8.8.8.8
		{"[::808:808]:80", false},                           // IPv4-compatible 8.8.8.8
		{"[2606:4700:4700::1111]:80", false},                // a public IPv6 address
		{"8.8.8.8:80", false},
	}
	g := &netGuard{}
	for _, tc := range tests {
		err := g.check(tc.addr)
		if got := errors.Is(err, ErrPrivateNetwork); got != tc.refused {
			t.Errorf("check(%s) error = %v, want refused %v", tc.addr, err, tc.refused)
		}
	}
	allowed := &netGuard{allow: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}}
	if err := allowed.check("[64:ff9b::a9fe:a9fe]:80"); err != nil {
		t.Errorf("check with 64:ff9b::/96 allowed error = %v, want nil", err)
	}
}
