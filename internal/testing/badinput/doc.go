// Package badinput loads the repository's bad-input corpus
// (testdata/badinput: hostile and broken raw records, each with the fields
// the quality gate must name), so the gate's own tests, the stream worker's
// tests and the fuzz seeds all read the same cases the same way. It is for
// tests and tools; nothing in a worker's path imports it.
package badinput
