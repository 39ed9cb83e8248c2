// Package zmtp is a small ZeroMQ Message Transport Protocol (ZMTP 3.0 and 3.1, RFC 23 and
// 37) layer with the NULL security mechanism: the greeting, the READY handshake, and
// framed messages over one net.Conn. It is what package kvevents/zmq builds its PUB, SUB,
// ROUTER and DEALER sockets on, so that talking to vLLM, llm-d or Dynamo over ZeroMQ needs
// nothing but Go.
//
// Everything a peer sends is hostile: a frame's declared length is checked against
// Limits before anything is read, bodies grow as their bytes arrive (never allocated by a
// declared length), a message has a bounded number of frames and bytes, and the handshake
// must finish by a deadline. A Conn's reads belong to one goroutine; its writes are
// serialised by a mutex, so that a reader may answer a PING while a writer sends.
//
// It is internal: the module's transports are its only users.
package zmtp
