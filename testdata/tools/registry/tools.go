//go:build tools

// Package tools pins the distribution registry that the OCI tests run as a real registry on
// 127.0.0.1 (scripts/build-tool.sh builds it into the tools cache).
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
