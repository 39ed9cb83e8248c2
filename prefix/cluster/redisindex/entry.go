package redisindex

import (
	"encoding/json"
	"strconv"
)

// Entry says that a server holds a block: llm-d's PodEntry. Its JSON form, with llm-d's
// field names in llm-d's order, is the field name in the block's Redis hash (the value is
// empty), so one block held by one server on two tiers is two fields.
type Entry struct {
	// Server is the server's identifier (llm-d's PodIdentifier).
	Server string
	// Tier is the medium holding the block, lower case ("gpu" when the event names
	// none, as llm-d defaults it; "cpu", "disk" for offloaded copies).
	Tier string
	// Speculative marks an entry a router added before an event confirmed it.
	Speculative bool
	// HasGroup says Group is meaningful: the block belongs to the server's KV-cache group
	// Group (llm-d's GroupIdx, a vLLM hybrid-model group).
	HasGroup bool
	Group    int
}

// llmdPodEntry is llm-d's PodEntry as encoding/json writes it: the field order and names
// are the wire format.
type llmdPodEntry struct {
	PodIdentifier string
	DeviceTier    string
	Speculative   bool
	HasGroup      bool
	GroupIdx      int
}

// DefaultTier is the tier of a block whose event names no medium, as llm-d assumes.
const DefaultTier = "gpu"

// String returns the entry as llm-d prints a PodEntry: server@tier[speculative][group=g].
func (e Entry) String() string {
	s := e.Server + "@" + e.Tier
	if e.Speculative {
		s += "[speculative]"
	}
	if e.HasGroup {
		s += "[group=" + strconv.Itoa(e.Group) + "]"
	}
	return s
}

// Field returns the entry's hash field: the JSON llm-d's encodeRedisPodField writes.
func (e Entry) Field() string {
	b, _ := json.Marshal(llmdPodEntry{e.Server, e.Tier, e.Speculative, e.HasGroup, e.Group})
	return string(b)
}

// ParseField reads a hash field back; ok is false for a field that is not an entry (or
// is longer than MaxFieldBytes), which lookups skip as llm-d's do.
func ParseField(f string) (e Entry, ok bool) {
	if len(f) > MaxFieldBytes {
		return Entry{}, false
	}
	var p llmdPodEntry
	if json.Unmarshal([]byte(f), &p) != nil || p.PodIdentifier == "" {
		return Entry{}, false
	}
	return Entry{Server: p.PodIdentifier, Tier: p.DeviceTier, Speculative: p.Speculative, HasGroup: p.HasGroup, Group: p.GroupIdx}, true
}
