package kvtest_test

import (
	"fmt"

	"github.com/kvpage/kvpage/blocktable"
	"github.com/kvpage/kvpage/blocktable/kvtest"
)

// printTB stands in for *testing.T in the examples: it prints what the kit reports.
type printTB struct{ cleanups []func() }

func (p *printTB) Helper()                           {}
func (p *printTB) Cleanup(f func())                  { p.cleanups = append(p.cleanups, f) }
func (p *printTB) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (p *printTB) Fatalf(format string, args ...any) { fmt.Printf("FATAL: "+format+"\n", args...) }

// end runs the cleanups, as testing does when a test ends.
func (p *printTB) end() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
}

// A test that forgets to finish a sequence fails when it ends, with the leaked blocks and
// the sequences that held them.
func ExampleNew() {
	t := &printTB{} // a *testing.T in a real test
	env := kvtest.New(t, kvtest.Config{Blocks: 9, BlockSize: 4})

	m := env.Manager
	if _, err := m.Admit(env.Seq("r1"), &blocktable.Request{Prompt: kvtest.MustTokens("0..9")}); err != nil {
		fmt.Println(err)
	}
	if err := m.Fork(env.Seq("r1"), env.Seq("r2")); err != nil {
		fmt.Println(err)
	}
	if err := m.Finish(env.Seq("r1")); err != nil {
		fmt.Println(err)
	}
	// r2 is never finished.
	fmt.Printf("%+v\n", env.Blocks())
	t.end()
	// Output:
	// {Capacity:8 Free:5 Evictable:0 Cached:2 Held:3}
	// FAIL: kvtest: blocks leaked: 3 blocks still held at the end of the test:
	//   sequences never finished or aborted: r2
	//   block 1: refcount 2, held by r2 (and cached)
	//   block 2: refcount 2, held by r2 (and cached)
	//   block 3: refcount 1, held by r2
}

// A Runner executes the scenario language line by line; RunFile does the same from a
// file and compares each output with the one written below the command.
func ExampleRunner() {
	r := kvtest.NewRunner(&printTB{})
	for _, cmd := range []string{
		"config blocks=9 bs=4",
		"admit r1 prompt=0..11",
		"admit r2 prompt=0..7,50..53",
		"finish r1",
		"evict 1",
		"log",
		"finish r2",
		"expect cached=3 evictable=3 r2.state=gone",
	} {
		out, err := r.Exec(cmd)
		if err != nil {
			fmt.Println("error:", err)
		}
		fmt.Printf("> %s\n%s\n", cmd, out)
	}
	// Output:
	// > config blocks=9 bs=4
	// ok
	// state free=8 evictable=0 held=0 cached=0 seqs=0
	// > admit r1 prompt=0..11
	// ok hit=0 new=3 tokens=12
	// state free=5 evictable=0 held=3 cached=3 seqs=1
	// > admit r2 prompt=0..7,50..53
	// ok hit=8 new=1 tokens=12
	// state free=4 evictable=0 held=4 cached=4 seqs=2
	// > finish r1
	// ok
	// state free=4 evictable=1 held=3 cached=4 seqs=1
	// > evict 1
	// evicted 1
	// state free=5 evictable=0 held=3 cached=3 seqs=1
	// > log
	// evicted 3
	// > finish r2
	// ok
	// state free=5 evictable=3 held=0 cached=3 seqs=0
	// > expect cached=3 evictable=3 r2.state=gone
	//
}
