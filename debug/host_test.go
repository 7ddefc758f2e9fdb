package debug_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/magpiecrawl/magpie/debug"
)

// TestWebDebuggerRefusesForeignHost: the web debugger answers only a Host
// header naming loopback, localhost or its configured address, so that a
// page of another site cannot read it through DNS rebinding.
func TestWebDebuggerRefusesForeignHost(t *testing.T) {
	w := &debug.WebDebugger{Address: "127.0.0.1:0"}
	if err := w.Init(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, port, _ := net.SplitHostPort(w.Addr())
	tests := []struct {
		host string
		want int
	}{
		{"evil.example:" + port, http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"127.0.0.1.nip.io:" + port, http.StatusForbidden},
		{"10.0.0.1:" + port, http.StatusForbidden},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"127.0.0.1:" + port, http.StatusOK},
		{"127.0.0.2:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
	}
	client := &http.Client{}
	for _, tc := range tests {
		for _, path := range []string{"/", "/status"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+w.Addr()+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			res, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s with Host %q: %v", path, tc.host, err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("GET %s with Host %q = %d, want %d", path, tc.host, res.StatusCode, tc.want)
			}
		}
	}
}
