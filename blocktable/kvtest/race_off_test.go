//go:build !race

package kvtest_test

// raceDetector is true under -race (see race_on_test.go).
const raceDetector = false
