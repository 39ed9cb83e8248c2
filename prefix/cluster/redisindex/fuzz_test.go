package redisindex_test

import (
	"testing"

	"github.com/kvpage/kvpage/prefix/cluster/redisindex"
)

// FuzzParseField: a hash field comes from a Redis that anyone with write access shares;
// reading it never panics, never accepts an entry without a server, and an entry it
// accepts writes back to a field that reads as the same entry.
func FuzzParseField(f *testing.F) {
	f.Add(`{"PodIdentifier":"pod-a","DeviceTier":"gpu","Speculative":false,"HasGroup":false,"GroupIdx":0}`)
	f.Add(`{"PodIdentifier":"p\u003c","DeviceTier":"cpu","Speculative":true,"HasGroup":true,"GroupIdx":7}`)
	f.Add(`{"GroupIdx":1,"PodIdentifier":"b"}`)
	f.Add(`[[[[`)
	f.Fuzz(func(t *testing.T, field string) {
		e, ok := redisindex.ParseField(field)
		if !ok {
			return
		}
		if e.Server == "" {
			t.Fatalf("accepted %q without a server", field)
		}
		if e.Group < 0 || len(e.Field()) > redisindex.MaxFieldBytes {
			return // llm-d's JSON allows a negative group (Add refuses one); escaping can lengthen a field
		}
		back, ok := redisindex.ParseField(e.Field())
		if !ok || back != e {
			t.Fatalf("%q read as %+v, written back as %q, read as %+v", field, e, e.Field(), back)
		}
	})
}
