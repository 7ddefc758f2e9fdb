// Command magpie crawls web sites with the magpie library.
//
//	magpie demo                 serve an embedded sample shop on 127.0.0.1 and crawl it
//	magpie crawl URL [flags]    crawl a site and write one JSON line per page
//
// Run "magpie crawl -h" for the crawl flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "demo":
		err = runDemo(ctx, args[1:], stdout, stderr)
	case "crawl":
		err = runCrawl(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "magpie: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "magpie %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  magpie demo [-parallel N] [-delay D]
        serve an embedded sample site on 127.0.0.1 and crawl it, with live progress
  magpie crawl URL [-depth N] [-parallel N] [-delay D] [-o out.jsonl]
        crawl a site (same host only) and write one JSON line per page
`)
}
