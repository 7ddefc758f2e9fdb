// Command magpie crawls web sites with the magpie library.
//
//	magpie crawl URL... [flags]   crawl sites and write one JSON line (or CSV row) per page
//	magpie demo [flags]           serve an embedded sample shop on 127.0.0.1 and crawl it
//	magpie --version              print the version this binary was built from
//
// Run "magpie crawl --help" for the crawl flags. Flags may come before or
// after the URLs, and long flags may be written with one dash or two
// (-depth 2, --depth 2, --depth=2).
//
// Exit status: 0 when every start URL was fetched (pages further in may have
// failed: the summary counts them), 1 when a start URL could not be fetched
// or the output could not be written, 2 for a usage error, 130 when
// interrupted by SIGINT (Ctrl-C) and 143 by SIGTERM. The first signal stops
// the crawl cleanly; a second one exits at once, the output finished.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	// The first SIGINT or SIGTERM stops the crawl cleanly (output written,
	// state kept); a second one ends the process at once (signals.go).
	ctx, stop := handleSignals(context.Background(), os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errInterrupted is returned when the crawl stopped for SIGINT or SIGTERM.
var errInterrupted = errors.New("interrupted")

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(longFlagsWithOneDash(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	name := cmd.CommandPath()
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ue *usageError
	switch {
	case errors.Is(err, errInterrupted):
		return interruptedStatus(ctx)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return exitUsage
	}
	return exitFailure
}

// newRootCommand builds the command tree.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "magpie",
		Short: "magpie crawls web sites",
		Long: `magpie crawls web sites: it follows links from the start URLs within their
scope, obeys robots.txt and per-host politeness, and writes one item per page
as JSON lines, CSV or a JSON array.`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q (want crawl or demo)", args[0])
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			return usagef("missing command (crawl or demo)")
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("magpie {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddCommand(newCrawlCommand(), newDemoCommand())
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	}
	return root
}

// version describes the build from runtime/debug build information: the
// module version ("v1.2.0" for go install …@v1.2.0, "(devel)" for a local
// build), the VCS revision when recorded, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(len(rev), 12)] + modified
	}
	return v + " " + info.GoVersion
}

// longFlagsWithOneDash rewrites "-name" and "-name=value" to "--name…" when
// name is a long flag of the command (or of the root), so that the
// single-dash spelling of Go's flag package, Katana and earlier magpie
// versions keeps working beside GNU-style flags. Shorthands ("-o", "-H")
// and everything after "--" are left alone.
func longFlagsWithOneDash(root *cobra.Command, args []string) []string {
	cmd := root
	if len(args) > 0 {
		if c, _, err := root.Find(args[:1]); err == nil && c != nil {
			cmd = c
		}
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && (cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil) {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}
