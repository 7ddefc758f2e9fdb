package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"
)

// validate checks what the flag parser lets through but the crawl cannot
// use: each mistake is a usage error of one line, found before anything
// runs (a bad --follow selector would otherwise panic in OnHTML).
func (f *crawlFlags) validate() error {
	f.state, f.stateDir = statePath(f.state)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", f.delay}, {"timeout", f.timeout}, {"max-duration", f.maxDuration}} {
		if d.v < 0 {
			return usagef("--%s %v: want a duration of 0 or more", d.name, d.v)
		}
	}
	if f.follow != "" {
		if _, err := cascadia.Compile(f.follow); err != nil {
			return usagef("--follow %q: not a CSS selector: %v", f.follow, err)
		}
	}
	if err := checkProxyScheme(f.proxy); err != nil {
		return err
	}
	return f.checkStateAndOutput()
}

// proxySchemes are the proxy URL schemes net/http's transport speaks.
var proxySchemes = map[string]bool{"http": true, "https": true, "socks5": true, "socks5h": true}

// checkProxyScheme refuses a proxy URL whose scheme no transport speaks
// (ftp://, socks4://): net/http would fail every request with it. A value
// without "://" (host:port) is left to --proxy's own parsing.
func checkProxyScheme(proxy string) error {
	scheme, _, ok := strings.Cut(proxy, "://")
	if !ok {
		return nil
	}
	if !proxySchemes[strings.ToLower(scheme)] {
		return usagef("--proxy %s: scheme %q is not supported: want http://, https:// or socks5://", redactProxy(proxy), scheme)
	}
	return nil
}

// checkStateAndOutput refuses --state and -o naming one file: the items
// would overwrite the crawl's state.
func (f *crawlFlags) checkStateAndOutput() error {
	if f.state == "" || f.out == "" || f.out == "-" {
		return nil
	}
	if sameFile(f.state, f.out) {
		return usagef("--state %s and -o %s are the same file: give each its own", f.state, f.out)
	}
	return nil
}

// sameFile reports whether a and b name one file: the same file when both
// exist, or the same absolute path.
func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// checkField refuses a --field whose name an earlier one took: a JSON
// object with the key twice, or two CSV columns of one name.
func (f *fieldFlags) checkField(name string) error {
	for _, fl := range *f {
		if fl.name == name {
			return fmt.Errorf("field name %q is given twice", name)
		}
	}
	return nil
}

// checkTaken refuses a --field named as a column the crawl adds itself:
// "change" with --state (what a recrawl found), "status", "kind" and
// "error" with --include-failed.
func (f fieldFlags) checkTaken(state, includeFailed bool) error {
	for _, fl := range f {
		switch {
		case state && fl.name == "change":
			return errors.New(`field name "change" is taken by what a recrawl found (--state)`)
		case includeFailed && (fl.name == "status" || fl.name == "kind" || fl.name == "error"):
			return fmt.Errorf("field name %q is taken by failed pages' columns (--include-failed)", fl.name)
		}
	}
	return nil
}

// absoluteAttrs are the attributes whose --field values are URLs, made
// absolute against the page (as Colly's Request.AbsoluteURL does) so that
// an item names the page it points to wherever it is read.
var absoluteAttrs = map[string]bool{"href": true, "src": true, "action": true, "poster": true, "cite": true, "data": true}
