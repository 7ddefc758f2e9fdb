// Package examples holds the test that builds and runs every program in
// _examples against the local site it serves itself, so that the examples
// cannot rot. The go tool skips folders starting with "_", so `go test ./...`
// would otherwise only see them if .ci/run builds them.
package examples
