//go:build tools

// Package tools pins the real tlog-witness that the deployment log's witness tests run on
// 127.0.0.1: litewitness and its admin command witnessctl, from filippo.io/torchwood, built by
// scripts/build-tool.sh litewitness into the tools cache. Its own module keeps torchwood's
// dependency graph (SQLite among it) out of ql3's go.mod.
package tools

import (
	_ "filippo.io/torchwood/cmd/litewitness"
	_ "filippo.io/torchwood/cmd/witnessctl"
)
