package extensions

import (
	"fmt"
	"math/rand/v2"

	"github.com/magpiecrawl/magpie"
)

// RandomUserAgent sets a desktop browser User-Agent, chosen anew for each
// request, overriding the collector's. The strings follow the formats
// current browsers send (Chrome, Edge, Firefox and Safari on Windows, macOS
// and Linux), with a major version drawn from a recent range.
func RandomUserAgent(c *magpie.Collector) {
	c.OnRequest(func(r *magpie.Request) { r.Headers.Set("User-Agent", desktopUserAgent(rand.IntN)) })
}

// RandomMobileUserAgent is RandomUserAgent with phone browsers: Chrome and
// Firefox on Android, Safari and Chrome on iOS.
func RandomMobileUserAgent(c *magpie.Collector) {
	c.OnRequest(func(r *magpie.Request) { r.Headers.Set("User-Agent", mobileUserAgent(rand.IntN)) })
}

// versions is a range of major versions a browser currently ships; the
// tables below are meant to be moved forward now and then.
type versions struct{ lo, hi int }

func (v versions) pick(intn func(int) int) int { return v.lo + intn(v.hi-v.lo+1) }

var (
	chromeVersions  = versions{132, 142}
	firefoxVersions = versions{134, 145}
	// Safari's versions have meaningful minors, so they are listed.
	safariVersions = []string{"17.6", "18.0", "18.1", "18.2", "18.3", "18.4", "18.5", "18.6"}
)

// Platform tokens as the browsers send them. Chrome and Safari freeze the
// macOS version at 10_15_7 and Chrome reduces Android to "Android 10; K",
// so these are what real traffic looks like, not stale values.
var (
	chromePlatforms  = []string{"Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10_15_7", "X11; Linux x86_64"}
	firefoxPlatforms = []string{"Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10.15", "X11; Linux x86_64", "X11; Ubuntu; Linux x86_64"}
	androidVersions  = []string{"13", "14", "15"}
)

// desktopUserAgent builds one desktop User-Agent with random source intn.
func desktopUserAgent(intn func(int) int) string {
	switch intn(4) {
	case 0: // Chrome
		return fmt.Sprintf("Mozilla/5.0 (%s) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36",
			oneOf(intn, chromePlatforms), chromeVersions.pick(intn))
	case 1: // Edge: Chrome's string plus its own token, same major version
		v := chromeVersions.pick(intn)
		return fmt.Sprintf("Mozilla/5.0 (%s) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36 Edg/%d.0.0.0",
			oneOf(intn, chromePlatforms[:2]), v, v)
	case 2: // Firefox
		v := firefoxVersions.pick(intn)
		return fmt.Sprintf("Mozilla/5.0 (%s; rv:%d.0) Gecko/20100101 Firefox/%d.0", oneOf(intn, firefoxPlatforms), v, v)
	default: // Safari
		return fmt.Sprintf("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/%s Safari/605.1.15",
			oneOf(intn, safariVersions))
	}
}

// mobileUserAgent builds one phone User-Agent with random source intn.
func mobileUserAgent(intn func(int) int) string {
	switch intn(4) {
	case 0: // Chrome on Android (reduced string)
		return fmt.Sprintf("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Mobile Safari/537.36",
			chromeVersions.pick(intn))
	case 1: // Firefox on Android
		v := firefoxVersions.pick(intn)
		return fmt.Sprintf("Mozilla/5.0 (Android %s; Mobile; rv:%d.0) Gecko/%d.0 Firefox/%d.0", oneOf(intn, androidVersions), v, v, v)
	case 2: // Safari on iPhone
		s := oneOf(intn, safariVersions)
		return fmt.Sprintf("Mozilla/5.0 (iPhone; CPU iPhone OS %s like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/%s Mobile/15E148 Safari/604.1",
			underscored(s), s)
	default: // Chrome on iPhone
		return fmt.Sprintf("Mozilla/5.0 (iPhone; CPU iPhone OS %s like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/%d.0.0.0 Mobile/15E148 Safari/604.1",
			underscored(oneOf(intn, safariVersions)), chromeVersions.pick(intn))
	}
}

func oneOf(intn func(int) int, s []string) string { return s[intn(len(s))] }

// underscored writes a version as iOS puts it in the platform token: 18.1 → 18_1.
func underscored(v string) string {
	b := []byte(v)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}
