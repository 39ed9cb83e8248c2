// Package depcheck holds no code: its test asserts that the library packages a server
// embeds import nothing but the standard library, each other and the few dependencies
// chosen for them, so that embedding the allocator never pulls in a network client, a
// wire codec, a plotting library or a command-line toolkit.
package depcheck
