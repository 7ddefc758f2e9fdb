package sqlitestore

import (
	"errors"

	"github.com/magpiecrawl/magpie/storage"
)

var (
	// ErrSchemaVersion is returned by Open when the file was written by a
	// newer schema than this package knows, so opening it could corrupt it.
	ErrSchemaVersion = errors.New("sqlitestore: unsupported schema version")
	// ErrInvalidPath is returned by Open for an empty path or one containing
	// '?', which the driver would take for connection parameters.
	ErrInvalidPath = errors.New("sqlitestore: invalid database path")
	// ErrInvalidArgument is returned for a Lease or LeaseHosts with n < 1 or
	// ttl <= 0, and a Renew with ttl <= 0. It is also
	// storage.ErrInvalidArgument for errors.Is, as the HostQueue contract
	// asks.
	ErrInvalidArgument error = invalidArgument{}
)

// invalidArgument is ErrInvalidArgument's type.
type invalidArgument struct{}

func (invalidArgument) Error() string { return "sqlitestore: invalid argument" }

func (invalidArgument) Is(target error) bool { return target == storage.ErrInvalidArgument }
