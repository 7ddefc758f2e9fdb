package limits

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestRuleMatch(t *testing.T) {
	tests := []struct {
		name string
		rule *Rule
		host string
		want bool
	}{
		{"glob hostname matches host:port", &Rule{DomainGlob: "127.0.0.1"}, "127.0.0.1:8080", true},
		{"glob hostname matches bare host", &Rule{DomainGlob: "127.0.0.1"}, "127.0.0.1", true},
		{"glob star subdomain", &Rule{DomainGlob: "*.example.com"}, "a.example.com", true},
		{"glob star crosses dots", &Rule{DomainGlob: "*.example.com"}, "a.b.example.com", true},
		{"glob star needs a subdomain", &Rule{DomainGlob: "*.example.com"}, "example.com", false},
		{"glob star subdomain with port", &Rule{DomainGlob: "*.example.com"}, "a.example.com:8443", true},
		{"glob other domain", &Rule{DomainGlob: "*.example.com"}, "example.org", false},
		{"glob star matches all", &Rule{DomainGlob: "*"}, "x.y.z:1", true},
		{"glob with port, same port", &Rule{DomainGlob: "127.0.0.1:8080"}, "127.0.0.1:8080", true},
		{"glob with port, other port", &Rule{DomainGlob: "127.0.0.1:8080"}, "127.0.0.1:8081", false},
		{"glob with port, no port", &Rule{DomainGlob: "127.0.0.1:8080"}, "127.0.0.1", false},
		{"glob with port wildcard", &Rule{DomainGlob: "*.example.com:8*"}, "a.example.com:8080", true},
		{"glob is case-insensitive on host", &Rule{DomainGlob: "example.com"}, "EXAMPLE.com:80", true},
		{"glob IPv6", &Rule{DomainGlob: "::1"}, "[::1]:8080", true},
		{"regexp anchored hostname", &Rule{DomainRegexp: `^example\.com$`}, "example.com:443", true},
		{"regexp anchored, subdomain", &Rule{DomainRegexp: `^example\.com$`}, "www.example.com", false},
		{"regexp with port", &Rule{DomainRegexp: `:8080$`}, "example.com:8080", true},
		{"regexp with port, other port", &Rule{DomainRegexp: `:8080$`}, "example.com:9090", false},
		{"regexp or glob", &Rule{DomainGlob: "a.com", DomainRegexp: `b\.com`}, "b.com", true},
		{"no pattern", &Rule{}, "a.com", false},
		{"bad regexp", &Rule{DomainRegexp: "("}, "a.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.Match(tt.host); got != tt.want {
				t.Errorf("Rule{Glob: %q, Regexp: %q}.Match(%q) = %v, want %v",
					tt.rule.DomainGlob, tt.rule.DomainRegexp, tt.host, got, tt.want)
			}
		})
	}
}

func TestRuleInit(t *testing.T) {
	tests := []struct {
		name string
		rule *Rule
		want error
	}{
		{"glob", &Rule{DomainGlob: "*.a.com"}, nil},
		{"regexp", &Rule{DomainRegexp: `a\.com`}, nil},
		{"none", &Rule{Delay: 1}, ErrNoPattern},
		{"bad regexp", &Rule{DomainRegexp: "(a"}, ErrBadPattern},
		{"bad glob", &Rule{DomainGlob: "{a"}, ErrBadPattern},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 2 { // idempotent
				if err := tt.rule.Init(); !errors.Is(err, tt.want) {
					t.Fatalf("Init() #%d error = %v, want %v", i, err, tt.want)
				}
			}
			if err := New().Add(tt.rule); !errors.Is(err, tt.want) {
				t.Errorf("Add() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRuleInitConcurrentAndRecompiles(t *testing.T) {
	r := &Rule{DomainGlob: "a.com"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := r.Init(); err != nil {
				t.Errorf("Init() error = %v, want nil", err)
			}
			r.Match("a.com")
		})
	}
	wg.Wait()
	if !r.Match("a.com") {
		t.Fatalf("Match(%q) = false, want true", "a.com")
	}
	r.DomainGlob = "b.com"
	if r.Match("a.com") || !r.Match("b.com") {
		t.Errorf("after changing DomainGlob, Match(a.com), Match(b.com) = %v, %v, want false, true",
			r.Match("a.com"), r.Match("b.com"))
	}
}

func TestLimiterAddAllOrNothing(t *testing.T) {
	l := New()
	err := l.Add(&Rule{DomainGlob: "a.com"}, &Rule{}, nil)
	if !errors.Is(err, ErrNoPattern) {
		t.Fatalf("Add() error = %v, want %v", err, ErrNoPattern)
	}
	if n := len(l.Rules()); n != 0 {
		t.Errorf("len(Rules()) = %d after failed Add, want 0", n)
	}
	r1, r2 := &Rule{DomainGlob: "*", Delay: 1}, &Rule{DomainGlob: "*", Delay: 2}
	if err := l.Add(r1, r2); err != nil {
		t.Fatalf("Add() error = %v, want nil", err)
	}
	if got := l.Rules(); len(got) != 2 || got[0] != r1 || got[1] != r2 {
		t.Errorf("Rules() = %v, want [r1 r2]", got)
	}
	if e, _ := l.lookup("x.com"); e == nil || e.delay != 1 {
		t.Errorf("lookup picked %+v, want the first rule (Delay 1)", e)
	}
}

func TestRuleClone(t *testing.T) {
	orig := &Rule{DomainGlob: "*.example.com", Delay: time.Second, RandomDelay: time.Millisecond, Parallelism: 3,
		TotalParallelism: 7, IgnoreCrawlDelay: true, AutoThrottle: &AutoThrottle{TargetConcurrency: 2, MaxDelay: time.Minute},
		PolitenessBy: PolitenessIP}
	if err := orig.Init(); err != nil {
		t.Fatal(err)
	}
	c := orig.Clone()
	if c.DomainGlob != orig.DomainGlob || c.Delay != orig.Delay || c.RandomDelay != orig.RandomDelay ||
		c.Parallelism != orig.Parallelism || c.TotalParallelism != orig.TotalParallelism ||
		c.IgnoreCrawlDelay != orig.IgnoreCrawlDelay || *c.AutoThrottle != *orig.AutoThrottle ||
		c.PolitenessBy != orig.PolitenessBy {
		t.Fatalf("Clone() = %+v, want the settings of %+v", c, orig)
	}
	if c.AutoThrottle == orig.AutoThrottle {
		t.Error("Clone shares the AutoThrottle pointer")
	}
	c.DomainGlob = "other.org"
	c.AutoThrottle.MaxDelay = time.Hour
	if err := c.Init(); err != nil {
		t.Fatalf("clone Init() error = %v", err)
	}
	if !c.Match("other.org") || c.Match("a.example.com") {
		t.Error("the clone does not match its own new pattern")
	}
	if !orig.Match("a.example.com") || orig.Match("other.org") || orig.AutoThrottle.MaxDelay != time.Minute {
		t.Error("changing the clone changed the original")
	}
}
