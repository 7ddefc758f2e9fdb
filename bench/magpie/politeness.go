//go:build !magpie_nopoliteness

package main

import (
	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/limits"
)

// PolitenessBy (issue 39), which a tree from before it does not have:
// run.sh builds such a tree with the magpie_nopoliteness tag, which leaves
// this file out (its crawlers then fail -politeness with errNotInBuild).
func init() {
	features["politeness"] = true
	politenessOption = func(s string) (magpie.CollectorOption, error) {
		p, err := limits.ParsePoliteness(s)
		if err != nil {
			return nil, err
		}
		return magpie.PolitenessBy(p), nil
	}
}
