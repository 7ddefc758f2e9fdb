//go:build !magpie_noprio

package main

import "github.com/magpiecrawl/magpie"

// Prioritize (issue 39), which a tree from before it does not have: run.sh
// builds such a tree with the magpie_noprio tag, which leaves this file out
// (its crawlers then fail -prioritize with errNotInBuild).
func init() {
	features["priority"] = true
	prioritizeOption = magpie.Prioritize
}
