package blocks

import "github.com/kvpage/kvpage/internal/testhook"

func init() {
	testhook.SetRefCount = func(pool any, id int32, n int32) { pool.(*Pool).refs[id] = n }
}
