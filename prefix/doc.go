// Package prefix is the prefix index of kvpage: a radix tree over full blocks of tokens that
// lets requests whose prompts begin alike share the KV blocks that hold that beginning.
//
// (Documentation in progress; see the Index methods.)
package prefix
