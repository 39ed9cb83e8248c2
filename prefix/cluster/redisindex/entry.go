package redisindex

import (
	"encoding/json"
	"strconv"
	"strings"
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
	if e, ok := parseCanonical(f); ok {
		return e, true
	}
	var p llmdPodEntry
	if json.Unmarshal([]byte(f), &p) != nil || p.PodIdentifier == "" {
		return Entry{}, false
	}
	return Entry{Server: p.PodIdentifier, Tier: p.DeviceTier, Speculative: p.Speculative, HasGroup: p.HasGroup, Group: p.GroupIdx}, true
}

// parseCanonical reads a field in exactly the form Field and llm-d write (encoding/json
// of the struct, no escapes in the strings) without the reflection of json.Unmarshal: a
// lookup reads one field per server per block, 16,384 for a 4,096-token prompt over 64
// servers. Anything else (escapes, other spacing or order) returns false and goes to
// json.Unmarshal.
func parseCanonical(f string) (Entry, bool) {
	var e Entry
	rest, ok := strings.CutPrefix(f, `{"PodIdentifier":"`)
	if !ok {
		return e, false
	}
	if e.Server, rest, ok = plainString(rest); !ok || e.Server == "" {
		return e, false
	}
	if rest, ok = strings.CutPrefix(rest, `,"DeviceTier":"`); !ok {
		return e, false
	}
	if e.Tier, rest, ok = plainString(rest); !ok {
		return e, false
	}
	if e.Speculative, rest, ok = boolField(rest, `,"Speculative":`); !ok {
		return e, false
	}
	if e.HasGroup, rest, ok = boolField(rest, `,"HasGroup":`); !ok {
		return e, false
	}
	if rest, ok = strings.CutPrefix(rest, `,"GroupIdx":`); !ok {
		return e, false
	}
	num, ok := strings.CutSuffix(rest, "}")
	if !ok || num == "" || len(num) > 10 {
		return e, false
	}
	g, err := strconv.Atoi(num)
	if err != nil || g < 0 || strconv.Itoa(g) != num {
		return e, false
	}
	e.Group = g
	return e, true
}

// plainString returns the string up to the next quote, when it holds no escape or
// control character, and what follows the quote.
func plainString(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i], s[i+1:], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", "", false
		}
	}
	return "", "", false
}

func boolField(s, name string) (bool, string, bool) {
	rest, ok := strings.CutPrefix(s, name)
	if !ok {
		return false, "", false
	}
	if r, ok := strings.CutPrefix(rest, "true"); ok {
		return true, r, true
	}
	if r, ok := strings.CutPrefix(rest, "false"); ok {
		return false, r, true
	}
	return false, "", false
}
