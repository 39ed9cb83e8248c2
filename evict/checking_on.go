//go:build kvinvariants || race

package evict

// checking mirrors internal/invariant.Enabled (evict imports no package of the module):
// under -tags kvinvariants or -race every policy re-checks its structure after mutations.
const checking = true
