// Package testserver finds and starts the real servers (Redis, NATS) that kvpage's
// integration tests run against. It is for tests only.
//
// A test that needs a server a developer did not start skips with a message naming the
// variable to set; under CI=true, where .ci/run starts every server, it fails instead, so a
// skipped integration test can never pass CI. A test that must restart or kill a server
// starts its own on a free loopback port with Start, never touching the shared one.
package testserver
