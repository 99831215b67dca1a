// Package event is the vocabulary every other reckon package shares: the
// event envelope (docs/requirements.md R-GATE-1) and its decoder, the
// quality gate that validates
// envelopes against rules from configuration, the dead-letter record, and the
// pane and feature records the speed and batch layers publish.
//
// It is pure: no I/O, no clock (callers pass arrival times in), no goroutines.
// It is not for transport concerns (it builds a dead letter's key, value and
// headers, DeadLetter.Record; the stream worker and the Z-report bridge turn
// that into a Kafka record) nor for storage layouts (package lake).
package event
