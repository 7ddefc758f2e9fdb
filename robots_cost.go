package magpie

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unsafe"
)

// Measured costs (Go 1.26, 64-bit) of what temoto/robotstxt keeps per rule,
// besides the body itself: a compiled pattern is a regexp.Regexp (about 300
// bytes with its rule) plus its program, whose instructions sit in a slice
// grown by append, plus, for each literal of one or two runes, the syntax
// node the instruction's rune slice points into (about 120 bytes), and the
// runes of longer literals. Every rule is also referenced from the rule list
// of each user agent of its group.
const (
	robotsPatternBase   = 300
	robotsLiteralNode   = 120
	robotsLiteralRune   = 6
	robotsRuleRef       = 16 // a pointer in a slice grown by append
	robotsPlainRuleBase = 64
)

// maxRobotsFileCost bounds what one parsed robots.txt may keep, as
// robotsCost estimates it: half the cache's budget, so that the cache's
// bound holds even with a single entry. A file of 20,000 rules of two
// wildcards costs about 28 MiB; rules past the bound are ignored, as RFC
// 9309 §2.5 lets a crawler ignore what lies past its size limit. It also
// stops a file that names thousands of user agents before thousands of rules
// (each rule is referenced from each agent's list) from taking gigabytes.
const maxRobotsFileCost = maxRobotsCacheBytes / 2

// robotsCost estimates the memory a parsed robots.txt keeps: the body, the
// rules, and for each rule with a wildcard ("*" or "$") the regular
// expression the parser compiles, sized from its actual program (which grows
// with the pattern's wildcards and literals, from about 1 KiB to tens of KiB
// per rule). It reads the body as temoto/robotstxt does, closely enough that
// the estimate stays above the heap a parsed file holds whatever the rules'
// shape (TestRobotsCostCoversRuleShapes).
func robotsCost(body []byte) int {
	_, cost := robotsWithin(body, -1)
	return cost
}

// robotsWithin returns the longest prefix of body, cut after a whole line,
// whose robotsCost is within limit (no limit when negative), and that cost.
func robotsWithin(body []byte, limit int) ([]byte, int) {
	cost := 512
	agents, inRules := 0, false
	for start := 0; start < len(body); {
		end := start
		for end < len(body) && body[end] != '\n' && body[end] != '\r' {
			end++
		}
		if end < len(body) {
			end++
		}
		lineCost := 2 * (end - start)
		line := string(body[start:end])
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if key, value, ok := strings.Cut(line, ":"); ok {
			value = strings.TrimSpace(value)
			switch strings.ToLower(strings.TrimSpace(key)) {
			case "user-agent", "useragent":
				if inRules {
					agents, inRules = 0, false
				}
				agents++
			case "allow", "disallow":
				if value != "" {
					inRules = true
					lineCost += robotsRuleRef*max(agents, 1) + robotsPatternCost(value)
				}
			}
		}
		if limit >= 0 && cost+lineCost > limit {
			return body[:start], cost
		}
		cost += lineCost
		start = end
	}
	return body, cost
}

// robotsPatternCost is the memory of one Allow or Disallow value once
// parsed: the compiled regular expression of a wildcard pattern, built the
// way the parser builds it.
func robotsPatternCost(value string) int {
	if !strings.HasPrefix(value, "*") && !strings.HasPrefix(value, "/") {
		value = "/" + value
	}
	value = strings.TrimRight(value, "*")
	if !strings.ContainsAny(value, "*$") {
		return robotsPlainRuleBase + len(value)
	}
	pattern := regexp.QuoteMeta(value)
	pattern = strings.ReplaceAll(pattern, `\*`, `.*`)
	pattern = strings.ReplaceAll(pattern, `\$`, `$`)
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return robotsPlainRuleBase + len(value) // the parser drops it too
	}
	re = re.Simplify()
	prog, err := syntax.Compile(re)
	if err != nil {
		return robotsPlainRuleBase + len(value)
	}
	cost := robotsPatternBase + 2*len(pattern) + int(unsafe.Sizeof(syntax.Inst{}))*cap(prog.Inst)
	var walk func(*syntax.Regexp)
	walk = func(n *syntax.Regexp) {
		if n.Op == syntax.OpLiteral {
			if len(n.Rune) <= 2 {
				cost += robotsLiteralNode
			} else {
				cost += robotsLiteralRune * len(n.Rune)
			}
		}
		for _, s := range n.Sub {
			walk(s)
		}
	}
	walk(re)
	return cost
}
