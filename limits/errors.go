package limits

import "errors"

var (
	// ErrNoPattern is returned by Rule.Init and Limiter.Add when a Rule has
	// neither DomainGlob nor DomainRegexp. The text is Colly's.
	//lint:ignore ST1005 the text is Colly's, kept so ported code comparing it still works.
	ErrNoPattern = errors.New("No pattern defined in LimitRule")
	// ErrBadPattern is returned (wrapped, with the compiler's message) by
	// Rule.Init and Limiter.Add when DomainGlob or DomainRegexp does not
	// compile.
	ErrBadPattern = errors.New("limits: bad domain pattern")
	// ErrNegativeBudget is returned (wrapped, naming the value) by
	// Limiter.Add when a Rule's MaxRequestsPerHost is below 0.
	ErrNegativeBudget = errors.New("limits: MaxRequestsPerHost below 0")
	// ErrClosed is returned by Gate.Put and Gate.Get after Gate.Close.
	ErrClosed = errors.New("limits: gate closed")
	// ErrBadPoliteness is returned (wrapped, with the value) by
	// Limiter.Add, Rule.Init, SetPoliteness and ParsePoliteness for a
	// Politeness that is not one of the constants.
	ErrBadPoliteness = errors.New("limits: unknown politeness")
	// ErrResolve is returned (wrapped, with the name and a *net.DNSError)
	// by Gate.Put and Limiter.Acquire when a host keyed by PolitenessIP
	// does not resolve.
	ErrResolve = errors.New("limits: politeness by IP found no address")
)
