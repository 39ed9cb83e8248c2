//go:build race

package main

// raceEnabled reports whether the race detector is on: the long single-goroutine replays
// skip then (they have no concurrency to check, and -tags kvinvariants still runs them).
const raceEnabled = true
