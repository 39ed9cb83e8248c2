//go:build race

package kvtest_test

// raceDetector is true under -race, where TestSystemStateMachine runs a quarter of its
// operations by default: the detector slows every memory access about tenfold, and the
// plain and kvinvariants runs keep the full 100,000.
const raceDetector = true
