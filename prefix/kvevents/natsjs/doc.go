// Package natsjs carries KV events over NATS JetStream, beside package zmq: the same
// batches (vLLM's msgpack form, encoded by kvevents), but kept in a stream instead of a
// publisher's bounded replay buffer, so that a router replica that restarts, or that
// joins late, replays what it missed from the stream, and any number of replicas each
// follow every server through a durable consumer of their own. NVIDIA Dynamo runs its
// KV-event plane on NATS JetStream the same way.
//
// A Publisher (a prefix.Observer built on kvevents.Recorder) publishes each batch on
// "<subject>.<server>" with the headers HeaderSeq (its sequence number) and HeaderEpoch
// (the publisher's run), and a Nats-Msg-Id so that JetStream drops a duplicate. A
// Subscriber reads the stream through the durable consumer "router-<replica>" and applies
// each server's batches to a kvevents.Applier (cluster.ClusterIndex in memory, or the
// Redis backend in cluster/redisindex): once each, in order.
//
// # Failures
//
//   - The scheduler never waits on NATS: the Recorder's observer side only copies events,
//     and its sender hands batches to nats.go asynchronously; while MaxPending batches await
//     the stream's acknowledgement (NATS down, a slow stream) further batches are refused
//     and counted, and their sequence numbers become gaps that subscribers count as lost.
//   - A disconnect: nats.go reconnects; the durable consumer resumes after the last
//     acknowledged batch, and batches redelivered after a lost acknowledgement are
//     recognised by sequence number and skipped.
//   - A slow consumer: the stream holds the backlog (bounded by StreamConfig MaxAge and
//     MaxBytes); at most MaxAckPending batches are delivered ahead of the index, so memory
//     stays bounded.
//   - An index that refuses a batch (Redis down): the Subscriber retries the same batch,
//     telling the stream it is in progress, so order holds.
//   - A server that restarts publishes under a new epoch from sequence 0 with an empty
//     cache: the Subscriber clears the server's entries first.
//
// Messages are hostile: a batch over MaxPayload, a subject that is not one valid token,
// missing or malformed headers, a payload that does not decode (the bounded kvevents
// Decoder, which also refuses byte-string hashes of another length than the servers' hasher
// writes: SubscriberConfig.HashSize, by default the index's HashSize() as for the ZeroMQ
// subscriber) are counted in Malformed and skipped.
//
// # Concurrency
//
// A Publisher's observer methods, Flush and Close belong to the index's goroutine; Stats
// may be read from any. A Subscriber runs one goroutine; its methods are safe for
// concurrent use. Each server's batches are applied in order; batches of different
// servers interleave as the stream holds them.
//
// # Invariants
//
// For each server and epoch, the Subscriber applies sequence numbers in increasing order,
// each at most once, and counts every number it skipped over as lost.
//
// Another transport is a package beside this one (as kvevents/zmq), built on
// kvevents.Recorder on the publishing side and kvevents.Applier on the subscribing side.
package natsjs
