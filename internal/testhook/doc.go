// Package testhook lets tests of other packages of the module reach a state that would take
// billions of calls to build honestly (a block with 2^31-1 holders). Nothing outside the
// module can import it, and production code never calls it.
package testhook
