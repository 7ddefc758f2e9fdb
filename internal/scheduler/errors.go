package scheduler

import (
	"errors"
	"fmt"
)

var (
	// ErrIllegalTransition is returned (wrapped in a *TransitionError) when a
	// lifecycle call is not allowed in the scheduler's current status.
	ErrIllegalTransition = errors.New("scheduler: illegal status transition")
	// ErrInvalidArgs is returned when Init is given arguments that fail Check;
	// the message names the bad field.
	ErrInvalidArgs = errors.New("scheduler: invalid arguments")
	// ErrInvalidModule is returned when a module is built or registered with a
	// missing function, a nil value or an unknown type.
	ErrInvalidModule = errors.New("scheduler: invalid module")
	// ErrDuplicateModule is returned when a module ID is registered twice.
	ErrDuplicateModule = errors.New("scheduler: duplicate module ID")
	// ErrNotFound is returned when the registrar holds no module of the asked
	// type or ID.
	ErrNotFound = errors.New("scheduler: module not found")
	// ErrNotStarted is returned by Submit when the scheduler is not started.
	ErrNotStarted = errors.New("scheduler: not started")
	// ErrPanic is wrapped by the error reported when a module panics.
	ErrPanic = errors.New("scheduler: module panicked")
)

// TransitionError reports a refused status transition. errors.Is(err,
// ErrIllegalTransition) is true for it.
type TransitionError struct {
	From, To Status
}

// Error names both states.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("scheduler: illegal status transition from %s to %s", e.From, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Stage names used in StageError.
const (
	StageDownload = "download"
	StageAnalyze  = "analyze"
	StagePipeline = "pipeline"
	StageSchedule = "schedule"
)

// StageError is what Errors() delivers: the stage and the ID of the module (if
// any) that failed, wrapping the module's error.
type StageError struct {
	Stage    string
	ModuleID string
	Err      error
}

// Error names the stage and module.
func (e *StageError) Error() string {
	if e.ModuleID == "" {
		return fmt.Sprintf("scheduler: %s: %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("scheduler: %s by %s: %v", e.Stage, e.ModuleID, e.Err)
}

// Unwrap returns the module's error.
func (e *StageError) Unwrap() error { return e.Err }

// panicError wraps ErrPanic with the recovered value.
func panicError(v any) error {
	if err, ok := v.(error); ok {
		return fmt.Errorf("%w: %w", ErrPanic, err)
	}
	return fmt.Errorf("%w: %v", ErrPanic, v)
}

// notBegunError is a Download's error when its context ended before the
// download function was called: the request is still queued work (the
// worker leaves it to Leftovers), not one the module cut short. It wraps the
// context's error.
type notBegunError struct{ err error }

func (e *notBegunError) Error() string { return "download not begun: " + e.err.Error() }
func (e *notBegunError) Unwrap() error { return e.err }
