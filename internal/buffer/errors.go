package buffer

import "errors"

var (
	// ErrClosed is returned when a Buffer or Pool is used after Close.
	ErrClosed = errors.New("buffer: closed")
	// ErrInvalidSize is returned when a Buffer or Pool is built with a capacity or
	// buffer number below one.
	ErrInvalidSize = errors.New("buffer: invalid size")
)
