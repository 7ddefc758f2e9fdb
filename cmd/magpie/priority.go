package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/magpiecrawl/magpie"
)

// priorityRule is one --priority REGEX=N: a URL that matches re gets n
// added to its priority.
type priorityRule struct {
	re *regexp.Regexp
	n  int
}

// priorityFlags collects repeated --priority flags, in the order given
// (the first rule whose pattern matches a URL wins).
type priorityFlags []priorityRule

func (f *priorityFlags) String() string {
	if len(*f) == 0 {
		return ""
	}
	parts := make([]string, len(*f))
	for i, r := range *f {
		parts[i] = r.re.String() + "=" + strconv.Itoa(r.n)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (f *priorityFlags) Type() string { return "REGEX=N" }

// Set parses REGEX=N at its last "=", so that the pattern may hold one
// ("page=1=5" ranks URLs matching "page=1" at 5).
func (f *priorityFlags) Set(v string) error {
	i := strings.LastIndex(v, "=")
	if i < 0 {
		return fmt.Errorf("want REGEX=N, got %q", v)
	}
	pattern, num := v[:i], v[i+1:]
	if pattern == "" {
		return fmt.Errorf("want REGEX=N, got %q: the pattern is empty", v)
	}
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%q: N must be between %d and %d", v, math.MinInt32, math.MaxInt32)
		}
		return fmt.Errorf("%q: N must be an integer", v)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	*f = append(*f, priorityRule{re: re, n: int(n)})
	return nil
}

// orderFlag is --order: breadth or depth, the crawl order the priorities
// start from (unset: the order links are found in).
type orderFlag struct{ v string }

func (f *orderFlag) String() string { return f.v }

func (f *orderFlag) Type() string { return "breadth|depth" }

func (f *orderFlag) Set(v string) error {
	if v != "breadth" && v != "depth" {
		return fmt.Errorf("%q: want breadth or depth", v)
	}
	f.v = v
	return nil
}

// priorityOptions are the collector options of --priority and --order.
func priorityOptions(rules priorityFlags, order string) []magpie.CollectorOption {
	var opts []magpie.CollectorOption
	switch order {
	case "breadth":
		opts = append(opts, magpie.BreadthFirst())
	case "depth":
		opts = append(opts, magpie.DepthFirst())
	}
	if len(rules) > 0 {
		opts = append(opts, magpie.Prioritize(func(r *magpie.Request) int {
			u := r.URL.String()
			for _, rule := range rules {
				if rule.re.MatchString(u) {
					// Added to the depth term of --order, within the
					// int32 range every priority must fit in.
					return min(max(r.Priority+rule.n, math.MinInt32), math.MaxInt32)
				}
			}
			return r.Priority
		}))
	}
	return opts
}
