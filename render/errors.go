package render

import "errors"

// ErrNoBrowser is returned by New when no browser is found: neither the path
// given with BrowserPath nor chromium, chromium-browser, google-chrome or
// google-chrome-stable on PATH.
var ErrNoBrowser = errors.New("render: no Chromium or Chrome browser found")

// ErrInvalidOption is returned by New when an option's value is unusable (a
// URL pattern that does not compile, a host glob that does not parse, a
// negative count).
var ErrInvalidOption = errors.New("render: invalid option")

// ErrLaunch is returned when the browser could not be started.
var ErrLaunch = errors.New("render: cannot start the browser")

// ErrTimeout is returned when a page did not load and settle (load event,
// network idle, WaitSelector) within the page timeout. It also matches
// context.DeadlineExceeded.
var ErrTimeout = errors.New("render: page timed out")

// ErrBrowserCrashed is returned when the browser process, or the renderer
// process of the page, went away while the page loaded. The next Fetch starts
// a new browser.
var ErrBrowserCrashed = errors.New("render: browser crashed")

// ErrNavigation is returned when the browser could not load the page itself
// (connection refused, DNS failure, aborted navigation); the text of the
// browser (such as net::ERR_CONNECTION_REFUSED) follows it.
var ErrNavigation = errors.New("render: navigation failed")

// ErrCertificate is returned, with ErrNavigation, when the browser refused
// the server's certificate (net::ERR_CERT_…: unknown authority, expired,
// wrong name). BrowserFlag("ignore-certificate-errors", true) lets such
// pages load.
var ErrCertificate = errors.New("render: certificate not trusted")

// ErrClosed is returned by Fetch after Close, and by a Fetch whose browser
// was closed by Close or Idle while its page loaded.
var ErrClosed = errors.New("render: renderer closed")
