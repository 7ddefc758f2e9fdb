package redisstore

import "errors"

// ErrInvalidArgument is returned for bad options (an empty Addr, a nil
// client, negative sizes) and for a Lease with n < 1 or ttl <= 0.
var ErrInvalidArgument = errors.New("redisstore: invalid argument")

// ErrNotInitialized is returned by the methods of a Storage used before its
// Init connected it.
var ErrNotInitialized = errors.New("redisstore: Storage used before Init")
