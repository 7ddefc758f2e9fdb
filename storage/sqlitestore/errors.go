package sqlitestore

import "errors"

var (
	// ErrSchemaVersion is returned by Open when the file was written by a
	// newer schema than this package knows, so opening it could corrupt it.
	ErrSchemaVersion = errors.New("sqlitestore: unsupported schema version")
	// ErrInvalidPath is returned by Open for an empty path or one containing
	// '?', which the driver would take for connection parameters.
	ErrInvalidPath = errors.New("sqlitestore: invalid database path")
	// ErrInvalidArgument is returned for a Lease with n < 1 or ttl <= 0.
	ErrInvalidArgument = errors.New("sqlitestore: invalid argument")
)
