// Command kvpage is the command-line face of the kvpage library: the fragmentation
// simulator (sim, the default), the capacity planner (plan, fleet), the vLLM-compatible
// block hasher (hash) and a walk through the block pool (demo). Run `kvpage --help` for
// the list and `kvpage SUBCOMMAND --help` for a subcommand's flags.
//
// Every subcommand follows the same rules: vLLM's flag names, written --name (a few have
// a short alias: -m, -tp); one size syntax (token counts as vLLM reads them, 8k = 8,000
// and 8K = 8,192; byte sizes with a unit, 80GB = 80 x 10^9 and 80GiB = 80 x 2^30);
// --help on stdout with exit status 0; bad input reported on one line naming the flag,
// with exit status 2; any other failure (a plan that does not fit) exit status 1.
package main
