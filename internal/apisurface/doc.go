// Command apisurface counts the exported identifiers of every package of the module, in one
// or two source trees, and prints a Markdown table: for each package, its exported types,
// functions, methods (of exported types), constants and variables, and their total. With
// two trees it prints the totals side by side, so that a change's effect on the surface can
// be read at a glance (bench/README.md, "API surface"):
//
//	git worktree add /tmp/kv-before 75ae4a1
//	go run ./internal/apisurface /tmp/kv-before .
//
// Test files, internal/ packages and main packages are not counted.
package main
