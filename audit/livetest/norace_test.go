//go:build !race

package livetest

const raceEnabled = false
