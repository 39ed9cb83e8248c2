package bench

// The conversation trace's parameters live outside the test files so that the simulator's
// conversation workload (bench/sim) draws the same trace shape from the same numbers; the
// generator itself is in eviction_conversation_test.go.

// Parameters of the conversation trace.
const (
	// ConvSystemPrompts system prompts of ConvSystemTokens tokens are shared by all
	// conversations; each conversation picks one with Zipf(ConvZipfS).
	ConvSystemPrompts = 8
	ConvSystemTokens  = 1024
	ConvZipfS         = 1.1
	// ConvConversations conversations in all, ConvOpen of them open at any time.
	ConvConversations = 1000
	ConvOpen          = 48
	// Each conversation has ConvTurnsMin..ConvTurnsMax turns; each turn a user message of
	// ConvUserMin..ConvUserMax tokens and a reply of ConvReplyMin..ConvReplyMax tokens.
	ConvTurnsMin, ConvTurnsMax = 2, 10
	ConvUserMin, ConvUserMax   = 16, 256
	ConvReplyMin, ConvReplyMax = 32, 512
)
