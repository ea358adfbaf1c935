// Package conformance holds test suites that others wrote, run against what ql3 writes:
// go-containerregistry reads and validates exported layouts and pushed artifacts, the in-toto
// attestation bindings validate signed statements, and go-securesystemslib's DSSE implementation
// cross-checks ql3's envelopes both ways (docs/conformance.md).
//
// It is a module of its own so that these libraries, and the newer golang.org/x versions they
// require, never enter ql3's own module graph or build: github.com/qinglong/ql3's go.mod does not
// name them, and deps_test.go checks that `go list -deps ./cmd/ql3` reaches none of them.
package conformance
