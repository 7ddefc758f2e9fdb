package main

import "github.com/magpiecrawl/magpie/limits"

// politenessFlag is --politeness: which hosts share one --parallel and
// --delay (limits.Politeness); a value other than host, domain or ip is a
// usage error.
type politenessFlag struct{ p limits.Politeness }

func (f *politenessFlag) String() string {
	if f.p == limits.PolitenessDefault {
		return limits.PolitenessHost.String()
	}
	return f.p.String()
}

func (f *politenessFlag) Type() string { return "host|domain|ip" }

func (f *politenessFlag) Set(v string) error {
	p, err := limits.ParsePoliteness(v)
	if err != nil {
		return err
	}
	f.p = p
	return nil
}
