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
)
