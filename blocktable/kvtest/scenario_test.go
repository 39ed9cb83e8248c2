package kvtest_test

import (
	"testing"

	"github.com/kvpage/kvpage/blocktable/kvtest"
)

// TestScenarios runs every scenario file in testdata; go test -run TestScenarios
// -kvtest.rewrite rewrites their expectations.
func TestScenarios(t *testing.T) {
	kvtest.RunFiles(t, "testdata/*.txt")
}
