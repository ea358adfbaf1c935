//go:build tools

// Package tools pins the third-party verifier ql3's attestation tests run: cosign, built from the
// Go module proxy by scripts/build-tool.sh cosign. Its own module keeps cosign's
// dependency graph out of ql3's go.mod.
package tools

import (
	_ "github.com/sigstore/cosign/v3/cmd/cosign"
)
