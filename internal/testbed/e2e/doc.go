// Package e2e holds no code: its tests (roundtrip_test.go) run ql3's parts end to end against the
// real test bed, and only tests may import what they use (internal/testbed/ceremonytest, internal/testbed/ocitest).
package e2e
