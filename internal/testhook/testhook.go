package testhook

// SetRefCount sets the holder count of block id of a *blocks.Pool directly, without any
// check. Package blocks installs it.
var SetRefCount func(pool any, id int32, n int32)
