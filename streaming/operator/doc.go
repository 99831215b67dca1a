// Package operator is the speed layer's decision core: a per-partition state
// machine that turns records (event id, key, value, event time, arrival time)
// into versioned window panes, rolling features and late side-output
// records, with Flink's event-time semantics (docs/requirements.md R-WIN,
// R-ROLL, R-DEL-1, R-DEL-2).
//
// The same code runs in three places: `reckon stream` (the Kafka shell owns
// one Operator per assigned partition inside that partition's run loop),
// `reckon simulate` (offline, one partition, no processing-time panes) and
// the batch recompute (Truth: unbounded lateness, final aggregates), so the
// fast and the true answers are computed by one code path.
//
// It is pure: no I/O, no goroutines, no clock. Processing time enters only as
// Record.Arrival and the argument of Tick. An Operator is not safe for
// concurrent use; its single owner serialises Process, Tick, EmitEarly and
// Snapshot. Outputs are appended to a caller-owned Out, so the shell can
// publish them, write Snapshot in the same transaction, and then commit.
//
// It is not for decoding or validating envelopes (package internal/event),
// nor for transport, metrics or persistence of snapshots (package streaming).
package operator
