// Package lint holds tests over the whole tree: the dependency rules
// between the rooms (TestForbiddenImports, after pebble's
// internal/lint) and docs/ARCHITECTURE.md's package table checked against
// `go list` (TestArchitectureTable). It has no code of its own.
package lint
