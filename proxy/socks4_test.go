package proxy_test

import (
	"errors"
	"testing"

	"github.com/magpiecrawl/magpie/proxy"
)

// TestSocks4RefusedAtStart: net/http cannot dial socks4, so a socks4:// proxy
// is refused when the switcher is made (Colly accepts it and every request
// through it fails).
func TestSocks4RefusedAtStart(t *testing.T) {
	for _, u := range []string{"socks4://127.0.0.1:1080", "socks4a://127.0.0.1:1080"} {
		if _, err := proxy.RoundRobinProxySwitcher("http://127.0.0.1:8080", u); !errors.Is(err, proxy.ErrInvalidProxyURL) {
			t.Errorf("RoundRobinProxySwitcher(%q) error = %v, want ErrInvalidProxyURL", u, err)
		}
	}
	if _, err := proxy.RoundRobinProxySwitcher("socks5://127.0.0.1:1080"); err != nil {
		t.Errorf("RoundRobinProxySwitcher(socks5) error = %v, want nil", err)
	}
}
