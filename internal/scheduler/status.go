package scheduler

import "fmt"

// Status is the scheduler's lifecycle state:
//
//	uninitialized → initializing → initialized → starting → started → stopping → stopped
//
// The -ing states are held while the call runs; any other lifecycle call made
// meanwhile is refused.
type Status int32

// Lifecycle states, in order.
const (
	StatusUninitialized Status = iota
	StatusInitializing
	StatusInitialized
	StatusStarting
	StatusStarted
	StatusStopping
	StatusStopped
)

var statusNames = [...]string{"uninitialized", "initializing", "initialized", "starting", "started", "stopping", "stopped"}

// String returns the lower-case state name.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int32(s))
}

// MarshalText makes Status print by name in JSON.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// checkTransition reports whether a scheduler in from may begin the call that
// leads to the transitional state to: initializing, starting or stopping.
func checkTransition(from, to Status) error {
	ok := false
	switch to {
	case StatusInitializing:
		ok = from == StatusUninitialized || from == StatusInitialized || from == StatusStopped
	case StatusStarting:
		ok = from == StatusInitialized
	case StatusStopping:
		ok = from == StatusStarted
	}
	if !ok {
		return &TransitionError{From: from, To: to}
	}
	return nil
}
