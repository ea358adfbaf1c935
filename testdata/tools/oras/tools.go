//go:build tools

// Package tools pins the oras CLI, the third-party client the OCI tests pull ql3's artifacts
// with (scripts/build-tool.sh builds it into the tools cache).
package tools

import (
	_ "oras.land/oras/cmd/oras"
)
