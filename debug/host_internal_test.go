package debug

import "testing"

// TestAllowedHostConfiguredAddress: besides loopback and localhost, the
// host of the configured address is answered, and nothing else; an
// unspecified listen address (0.0.0.0) does not open every Host.
func TestAllowedHostConfiguredAddress(t *testing.T) {
	tests := []struct {
		host, own string
		want      bool
	}{
		{"crawler.lan:7676", "crawler.lan", true},
		{"CRAWLER.LAN.", "crawler.lan", true},
		{"evil.example:7676", "crawler.lan", false},
		{"192.168.1.5:7676", "192.168.1.5", true},
		{"192.168.1.6:7676", "192.168.1.5", false},
		{"192.168.1.5:7676", "0.0.0.0", false},
		{"[::1]:7676", "0.0.0.0", true},
		{"", "", false},
	}
	for _, tc := range tests {
		if got := allowedHost(tc.host, tc.own); got != tc.want {
			t.Errorf("allowedHost(%q, %q) = %v, want %v", tc.host, tc.own, got, tc.want)
		}
	}
}
