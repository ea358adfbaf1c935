//go:build depsanchor

// Package depsanchor keeps the project's chosen dependencies in go.mod while the packages that
// use them are being written in parallel. It is removed once every dependency has a real importer.
package depsanchor

import (
	_ "github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	_ "github.com/opencontainers/go-digest"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/yaml"
)
