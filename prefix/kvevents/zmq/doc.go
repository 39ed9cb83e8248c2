// Package zmq carries KV events over ZeroMQ exactly as vLLM's ZmqEventPublisher does, so
// that llm-d's KV-cache indexer, Dynamo's router or a Subscriber of this package can follow
// a kvpage server. A Publisher (a prefix.Observer) sends every batch on a PUB socket as the
// frames [topic, sequence number (8 bytes big-endian), msgpack payload] and, with
// WithReplay, answers replay requests on a ROUTER socket from a buffer of its last
// batches. A Subscriber reads a server's PUB socket, fills gaps from its replay socket,
// and applies each batch once and in order to a cluster.Index.
//
// The sockets speak ZMTP 3.0/3.1 with the NULL mechanism, in pure Go (internal/zmtp), and
// interoperate with libzmq (the tests run a pyzmq peer when one is installed). Every
// port is reachable by anyone on the network, so everything a peer sends or withholds is
// bounded: frame and message sizes (checked before anything is read for them), handshake
// deadlines, per-subscriber queues and write deadlines, bounded connections per socket,
// and a Close that returns within the linger time whatever the peers do. Nothing a
// publisher drops goes uncounted, and a subscriber detects every gap by sequence number.
//
// # Concurrency
//
// A Publisher's observer methods, Flush and Close belong to the index's goroutine (they
// never wait on the network); its Stats and endpoints may be read from any. It runs a
// sender goroutine and, with replay, a replay goroutine. A Subscriber runs its own
// goroutines; its methods are safe for concurrent use.
//
// # Invariants
//
// A Publisher's sequence numbers are consecutive from 0 (kvevents.WithFirstSeq) in the
// order batches were sealed; every sealed batch is either published once, in order, or
// counted as dropped. Its replay buffer holds the last published batches in sequence
// order, at most its capacity. A Subscriber applies each batch of one run of the
// publisher at most once and in sequence order, and counts every sequence number it
// neither applied nor received twice as lost; a restarted publisher's run (see
// Subscriber) starts with the server's blocks cleared.
//
// # Extending
//
// Another transport is a package beside this one (as kvevents/natsjs) built on
// kvevents.Recorder (a Sink) on the publishing side and kvevents.Applier on the
// subscribing side.
package zmq
