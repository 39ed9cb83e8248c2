package kvtest

import (
	"os"
	"path/filepath"
)

// CheckGolden compares got with the golden file at path and fails the test, showing both,
// when they differ. With -kvtest.rewrite it writes got to path instead (creating its
// directory), so that a golden file is made or updated by running the test once with the
// flag and reviewing the diff. Env.Dump is the usual got.
func CheckGolden(tb TB, path, got string) {
	tb.Helper()
	if rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatalf("kvtest: %v", err)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatalf("kvtest: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("kvtest: %v (run the test with -kvtest.rewrite to create it)", err)
		return
	}
	if string(want) != got {
		tb.Errorf("kvtest: %s differs (run with -kvtest.rewrite to accept the new output)\nwant:\n%s\ngot:\n%s", path, indent(string(want)), indent(got))
	}
}
