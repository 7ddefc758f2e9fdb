package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/magpiecrawl/magpie/render"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/magpiecrawl/magpie"
)

// failFlags are the flags that say what became of the failed requests.
type failFlags struct {
	errorsFile    string
	verbose       bool
	includeFailed bool
}

func (f *failFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.errorsFile, "errors", "", "write one JSON line per failed request to `FILE`: url, status, kind, error, attempts, from (the page that linked to it) and linked_from (up to 10 pages that link to it)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print on standard error each failed request (kind, status, URL and the page that linked to it), each URL robots.txt blocks, and each request that waits (Retry-After, back-off, robots.txt)")
	fs.BoolVar(&f.includeFailed, "include-failed", false, "also write an item for each failed page (status 0 when no answer came, with the failure's kind and error), so that the output lists every URL tried")
}

// Failure kinds: the "kind" of an --errors line and, but for http, the
// summary's names.
const (
	kindHTTP       = "http"
	kindTimeout    = "timeout"
	kindTLS        = "tls"
	kindScope      = "scope"
	kindExcluded   = "excluded"
	kindRobots     = "robots"
	kindRedirects  = "redirects"
	kindProxy      = "proxy"
	kindDNS        = "dns"
	kindConnection = "connection"
	kindPrivate    = "private network"
	kindCancelled  = "cancelled"
	kindBusy       = "busy" // a Retry-After over --max-retry-after
	kindOther      = "other"
)

// errorKind names what made a request fail. stopping says that the crawl
// itself was ending (Ctrl-C, --max-duration), so that a context error is
// the crawl's, not a timeout of the request's own.
func errorKind(err error, stopping bool) string {
	if errors.Is(err, magpie.ErrRetryAfterTooLong) {
		return kindBusy // an *HTTPError too, which names the status
	}
	if _, ok := errors.AsType[*magpie.HTTPError](err); ok {
		return kindHTTP
	}
	var opErr *net.OpError
	proxyOp := errors.As(err, &opErr) && isProxyOp(opErr.Op)
	switch {
	case errors.Is(err, magpie.ErrPrivateNetwork) && !proxyOp:
		return kindPrivate
	case stopping && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return kindCancelled
	case isTimeout(err):
		return kindTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, magpie.ErrStopped):
		return kindCancelled
	case errors.Is(err, magpie.ErrForbiddenDomain), errors.Is(err, magpie.ErrNoURLFiltersMatch):
		return kindScope // a redirect out of --scope
	case errors.Is(err, magpie.ErrForbiddenURL):
		return kindExcluded
	case errors.Is(err, magpie.ErrRobotsTxtBlocked):
		return kindRobots
	case errors.Is(err, magpie.ErrTooManyRedirects):
		return kindRedirects
	case proxyOp:
		return kindProxy
	case isTLS(err):
		return kindTLS
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return kindDNS
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return kindConnection
	}
	return kindOther
}

// isProxyOp reports the net.OpError operation of a connection to a proxy:
// "proxyconnect" for HTTP proxies, "socks connect" for SOCKS5.
func isProxyOp(op string) bool {
	return op == "proxyconnect" || strings.HasPrefix(op, "socks")
}

// isTLS reports a failed TLS handshake: a certificate that does not verify,
// or a server that does not speak TLS.
func isTLS(err error) bool {
	if isCertificate(err) {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	return false
}

// isCertificate reports a server certificate that did not verify, which
// --insecure lets through.
func isCertificate(err error) bool {
	if errors.Is(err, render.ErrCertificate) { // --render: the browser's own check
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}

// labels are the summary's names of some kinds, kept from earlier versions.
var labels = map[string]string{
	kindDNS:        "DNS lookup failed",
	kindConnection: "connection failed",
	kindPrivate:    "private network (refused)",
}

// label is a failure kind's name in the summary and -v lines.
func label(kind string, status int) string {
	if kind == kindHTTP {
		return fmt.Sprintf("http %d", status)
	}
	if l, ok := labels[kind]; ok {
		return l
	}
	return kind
}

// failure is one line of --errors.
type failure struct {
	URL      string `json:"url"`
	Status   int    `json:"status"`
	Kind     string `json:"kind"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
	From     string `json:"from,omitempty"`
	// LinkedFrom lists up to maxReferrers pages that link to the URL, From
	// first; LinkedFromMore counts the others.
	LinkedFrom     []string `json:"linked_from,omitempty"`
	LinkedFromMore int      `json:"linked_from_more,omitempty"`
}

// failures reports the failed requests: the summary's tally, the --errors
// file, -v lines and --include-failed items. Safe for concurrent use.
type failures struct {
	t        *tally
	stopping func() bool // whether the crawl is ending
	proxy    string      // --proxy, for messages

	// mu guards everything below but log and verbose, which are set
	// before the crawl (a nil log or verbose is read without it).
	mu      sync.Mutex
	log     io.Writer // --errors; nil without
	file    *os.File  // the --errors file, to close
	base    int64     // the file's size before this run (--state appends)
	logErr  error     // the first error writing log
	verbose io.Writer // -v; nil without
	clear   bool      // verbose is a terminal with a live progress line
	// links follows the pages that link to each URL, for --errors.
	links linkLog
}

// open returns the failures to report as the flags ask, with the --errors
// file created (or, when a --state crawl resumes, opened to append). Close
// it after the crawl.
func (f *failFlags) open(resuming bool, quiet bool, stderr io.Writer) (*failures, error) {
	fl := &failures{}
	if f.errorsFile != "" {
		file, err := openErrorLog(f.errorsFile, resuming)
		if err != nil {
			return nil, err
		}
		fl.log, fl.file = file, file
		if resuming {
			if fl.base, err = file.Seek(0, io.SeekEnd); err != nil {
				file.Close()
				return nil, fmt.Errorf("--errors: %w", err)
			}
		}
	}
	if f.verbose {
		fl.verbose = stderr
		live, _ := terminal(stderr)
		fl.clear = live && !quiet
	}
	return fl, nil
}

// close closes the --errors file, once its lines name the pages found
// linking to each URL after it was written (see rewrite).
func (fl *failures) close() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.file != nil {
		if fl.links.dirty && fl.logErr == nil {
			fl.logErr = fl.rewrite()
		}
		if err := fl.file.Close(); err != nil && fl.logErr == nil {
			fl.logErr = err
		}
		fl.file = nil
	}
}

// rewrite writes this run's --errors lines again, in place of those
// written as each request failed, now that the pages linking to each URL
// are known; the lines of earlier runs (--state) are kept. A file that is
// not a regular file (a pipe) keeps the lines as they were written. fl.mu
// is held.
func (fl *failures) rewrite() error {
	if st, err := fl.file.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	var buf bytes.Buffer
	for _, rec := range fl.links.records {
		line, err := rec.line()
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
	}
	if err := fl.file.Truncate(fl.base); err != nil {
		return err
	}
	if _, err := fl.file.Seek(fl.base, io.SeekStart); err != nil {
		return err
	}
	_, err := fl.file.Write(buf.Bytes())
	return err
}

// openErrorLog creates (or, when appending, opens at its end) the --errors
// file, before the crawl starts.
func openErrorLog(path string, appending bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appending {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--errors: %w", err)
	}
	return f, nil
}

// record reports one failed request; it returns the failure. A request
// the crawl's own stop cut short (kind cancelled while stopping) is not a
// failure of the site: it is counted as interrupted, and neither written
// to --errors nor printed by -v.
func (fl *failures) record(r *magpie.Response, err error) failure {
	kind := errorKind(err, fl.stopping())
	f := failure{Kind: kind, Error: fl.message(err), Attempts: 1}
	if kind == kindCancelled && fl.stopping() {
		if fl.t != nil {
			fl.t.interrupt()
		}
		return f
	}
	if r != nil && r.Request != nil {
		if r.Request.URL != nil {
			f.URL = r.Request.URL.Redacted()
		}
		f.From = r.Request.ParentURL()
	}
	if r != nil {
		f.Status = r.StatusCode
	}
	if he, ok := errors.AsType[*magpie.HTTPError](err); ok {
		f.Status = he.StatusCode
	}
	if re, ok := errors.AsType[*magpie.RetryError](err); ok {
		f.Attempts = re.Attempts
	}
	l := label(kind, f.Status)
	if fl.t != nil {
		fl.t.fail(l)
	}
	fl.write(responseKeys(r), f, l)
	return f
}

// write writes f's --errors line, for the URLs keys (see responseKeys),
// and its -v line.
func (fl *failures) write(keys []uint64, f failure, label string) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.log != nil && fl.logErr == nil {
		line, err := fl.failedRecord(keys, f).line()
		if err == nil {
			_, err = fl.log.Write(append(line, '\n'))
		}
		fl.logErr = err
	}
	if fl.verbose != nil {
		msg := fmt.Sprintf("failed: %s: %s", label, f.URL)
		if f.From != "" {
			msg += fmt.Sprintf(" (from %s)", f.From)
		}
		if f.Kind != kindHTTP {
			msg += ": " + f.Error
		}
		fl.say(msg)
	}
}

// refused names, with -v, a request refused because its host had the
// requests --max-pages-per-host allows: a bound the user set, not a
// failure, but a page not crawled that they may look for. Other refusals
// (already visited, out of scope) are only counted.
func (fl *failures) refused(r *magpie.Request, err error) {
	if fl.verbose == nil || r == nil || r.URL == nil || !errors.Is(err, magpie.ErrMaxRequestsPerHost) {
		return
	}
	var b strings.Builder
	if fl.clear {
		b.WriteString("\r\x1b[K")
	}
	fmt.Fprintf(&b, "skipped: over --max-pages-per-host: %s", r.URL.Redacted())
	if from := r.ParentURL(); from != "" {
		fmt.Fprintf(&b, " (from %s)", from)
	}
	b.WriteByte('\n')
	fl.mu.Lock()
	defer fl.mu.Unlock()
	_, _ = io.WriteString(fl.verbose, b.String())
}

// say writes msg as a -v line (clearing the live progress line first);
// fl.mu is held.
func (fl *failures) say(msg string) {
	if fl.clear {
		msg = "\r\x1b[K" + msg
	}
	_, _ = io.WriteString(fl.verbose, msg+"\n")
}

// skipped names on the -v lines a URL robots.txt keeps out (each once: the
// caller tells the first time).
func (fl *failures) skipped(kind string, r *magpie.Request) {
	if fl.verbose == nil || r == nil || r.URL == nil {
		return
	}
	msg := fmt.Sprintf("skipped: %s: %s", kind, r.URL.Redacted())
	if from := r.ParentURL(); from != "" {
		msg += fmt.Sprintf(" (from %s)", from)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.say(msg)
}

// waiting names on the -v lines a request that waits before it is sent
// (again), and why.
func (fl *failures) waiting(w magpie.Wait) {
	if fl.verbose == nil {
		return
	}
	msg := fmt.Sprintf("waiting: %s, %s", w.Reason, secondsLeft(w.Until))
	if w.Status != 0 {
		msg += fmt.Sprintf(" (http %d)", w.Status)
	}
	msg += ": " + w.URL
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.say(msg)
}

// err returns the first error writing the --errors file.
func (fl *failures) err() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.logErr != nil {
		return fmt.Errorf("--errors: %w", fl.logErr)
	}
	return nil
}

// message is err for a person on the command line (see describe).
func (fl *failures) message(err error) string {
	if re, ok := errors.AsType[*magpie.RetryError](err); ok {
		err = re.Err // attempts has its own field
	}
	return describe(err, fl.proxy)
}

// failedItem is the --include-failed item of a failed page: its URL,
// status (0 when no answer came), and the failure's kind and error, without
// title or links; with --field, empty fields and status, kind and error
// columns.
func failedItem(cfg crawlConfig, r *magpie.Response, f failure) any {
	u := r.Request.URL.String()
	if len(cfg.fields) == 0 {
		return pageRecord{URL: u, Status: f.Status, Depth: r.Request.Depth, Kind: f.Kind, Error: f.Error}
	}
	// A failure is no change: the change column is left out (an empty
	// cell in a CSV).
	names := slices.DeleteFunc(cfg.columns(), func(n string) bool { return n == "change" })
	rec := fieldRecord{names: names, values: []string{u}}
	for range cfg.fields {
		rec.values = append(rec.values, "")
	}
	rec.values = append(rec.values, strconv.Itoa(f.Status), f.Kind, f.Error)
	return rec
}

// emitsFailed reports whether OnError's err is a page that failed, rather
// than a callback's error on a page already written or a storage outage.
func emitsFailed(err error) bool {
	return !errors.Is(err, magpie.ErrCallbackPanic) && !errors.Is(err, magpie.ErrCallbackStuck) &&
		!errors.Is(err, magpie.ErrStorageUnavailable)
}
