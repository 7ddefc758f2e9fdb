package warc

import "errors"

var (
	// ErrClosed is returned when an exchange is archived after Close.
	ErrClosed = errors.New("warc: writer closed")
	// ErrRecording is returned when the bytes of an exchange could not be
	// recorded (a temporary file could not be written).
	ErrRecording = errors.New("warc: exchange not recorded")
	// ErrUnreadableExchange is returned when a recorded exchange is not an
	// HTTP/1.x request and response: nothing of it is written.
	ErrUnreadableExchange = errors.New("warc: exchange is not HTTP/1.x")
	// ErrRecovery is returned by New when a file a killed crawl left open
	// cannot be cut back to its whole records.
	ErrRecovery = errors.New("warc: recovering an open file")
)
