package magpie

// Collector is the crawler. SKELETON: being built.
type Collector struct{}
