package render

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/gobwas/glob"
)

// Defaults of the options.
const (
	// DefaultTabs is how many pages load at once without Tabs.
	DefaultTabs = 4
	// DefaultTimeout bounds one page without Timeout: navigation, load,
	// network idle and WaitSelector together.
	DefaultTimeout = 30 * time.Second
	// DefaultLaunchTimeout bounds a browser start without LaunchTimeout.
	// Chromium starts in well under a second on an idle machine, but in
	// several seconds on a loaded one (a CI runner, a machine shared with
	// the crawl's own work); a start that takes a minute has failed.
	DefaultLaunchTimeout = time.Minute
	// DefaultNetworkIdle is how long a page must have no request in flight,
	// after its load event, to count as settled without NetworkIdle (the
	// quiet period of Chromium's own networkIdle lifecycle event).
	DefaultNetworkIdle = 500 * time.Millisecond
)

// Option configures a Renderer (see New).
type Option func(*config) error

// config is a Renderer's settings, fixed by New.
type config struct {
	patterns []*regexp.Regexp
	hosts    []*glob.Pattern
	all      bool
	tabs     int
	timeout  time.Duration
	launch   time.Duration
	idle     time.Duration
	selector string
	path     string
	flags    map[string]any
	logger   *slog.Logger
}

// Match renders the URLs that match one of the regular expressions (Go
// syntax, matched anywhere in the whole URL). With Hosts as well, a URL must
// satisfy both.
func Match(patterns ...string) Option {
	return func(c *config) error {
		for _, p := range patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("%w: Match(%q): %w", ErrInvalidOption, p, err)
			}
			c.patterns = append(c.patterns, re)
		}
		return nil
	}
}

// Hosts renders the URLs whose host (without port) matches one of the globs,
// in gobwas/glob syntax, as a LimitRule's DomainGlob
// ("*.example.com", "shop.example.*"). With Match as well, a URL must
// satisfy both.
func Hosts(globs ...string) Option {
	return func(c *config) error {
		for _, g := range globs {
			gg, err := glob.Compile(g)
			if err != nil {
				return fmt.Errorf("%w: Hosts(%q): %w", ErrInvalidOption, g, err)
			}
			c.hosts = append(c.hosts, gg)
		}
		return nil
	}
}

// All renders every GET request. Without All, Match or Hosts, only requests
// marked with Mark are rendered.
func All() Option {
	return func(c *config) error {
		c.all = true
		return nil
	}
}

// Tabs sets how many pages load at once, each in its own tab (default
// DefaultTabs). A Fetch waits for a free tab. Each tab costs memory (a
// renderer process, tens of MB); see the README for measured figures.
func Tabs(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: Tabs(%d): want at least 1", ErrInvalidOption, n)
		}
		c.tabs = n
		return nil
	}
}

// Timeout bounds the loading of one page once it has a tab (default
// DefaultTimeout): navigation, load event, network idle and WaitSelector. A
// page that does not settle in time fails with ErrTimeout. It does not
// count the browser's start (see LaunchTimeout), so a short Timeout stays
// a bound on the page on a machine where the browser is slow to start.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: Timeout(%v): want a positive duration", ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// LaunchTimeout bounds the start of the browser (default
// DefaultLaunchTimeout), separately from each page's Timeout: the first
// rendered page, and the first after the browser died or the crawl
// stopped, waits for the start and then has its whole Timeout. A start that
// does not finish in time fails the page with ErrLaunch.
func LaunchTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: LaunchTimeout(%v): want a positive duration", ErrInvalidOption, d)
		}
		c.launch = d
		return nil
	}
}

// NetworkIdle sets how long a page must go without a request in flight, after
// its load event, before its DOM is read (default DefaultNetworkIdle). 0
// reads it at the load event. A page that never goes quiet (polling,
// streaming) times out: use 0 and WaitSelector for it.
func NetworkIdle(quiet time.Duration) Option {
	return func(c *config) error {
		if quiet < 0 {
			return fmt.Errorf("%w: NetworkIdle(%v): want 0 or more", ErrInvalidOption, quiet)
		}
		c.idle = quiet
		return nil
	}
}

// WaitSelector makes every page wait, after load and network idle, until an
// element matches the CSS selector; a page where none appears times out.
func WaitSelector(css string) Option {
	return func(c *config) error {
		c.selector = css
		return nil
	}
}

// BrowserPath sets the browser executable, instead of looking for chromium,
// chromium-browser, google-chrome and google-chrome-stable on PATH.
func BrowserPath(path string) Option {
	return func(c *config) error {
		c.path = path
		return nil
	}
}

// BrowserFlag adds a command-line switch for the browser (name without the
// leading dashes; value true for a bare switch, false to remove a default,
// or a string). The defaults are headless, --no-sandbox, --disable-gpu,
// --disable-quic, --no-first-run, --disable-background-networking,
// --disable-component-update, --disable-sync and chromedp's usual set, with a
// fresh temporary --user-data-dir removed when the browser ends.
func BrowserFlag(name string, value any) Option {
	return func(c *config) error {
		switch value.(type) {
		case bool, string:
		default:
			return fmt.Errorf("%w: BrowserFlag(%q): value %T, want bool or string", ErrInvalidOption, name, value)
		}
		if c.flags == nil {
			c.flags = make(map[string]any)
		}
		c.flags[name] = value
		return nil
	}
}

// Logger sets the logger for browser starts and stops (Info) and each page
// (Debug); silent by default.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}
