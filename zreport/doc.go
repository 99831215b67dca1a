// Package zreport is the decision core of Z-report business-key aggregation
// (docs/requirements.md R-Z, docs/adr/0005-zreport-entity-workflows.md):
// one State per business key — fiscal drive number
// (ФН, 16 digits) plus shift number — assembled from three parts, OFD (the
// fiscal data operator's Z-report, the only primary document), DWH (an
// aggregate of receipts) and RMS (an aggregate of operations), in any order,
// at any delay.
//
// Readiness is a business condition, not a time window: the key is final
// when all three sources are present; the sources are then compared and the
// aggregate is matched or mismatched. Time enters only through deadlines
// computed from the data (the first applied part's shift_closed_at): at
// shift_closed_at + Policy.OFDRequestAfter (day six) the operator is asked
// for a missing OFD document, again every Policy.OFDRetry while it answers
// "not yet"; at shift_closed_at + Policy.Retention a key still waiting is
// finalized as incomplete, naming the missing sources. A part that arrives
// after finalization yields a new version, never a silent second run.
//
// The package is pure: no I/O, no clock, no goroutines. Every method takes
// the current time as an argument, so the same code runs inside the
// Temporal workflow (workflow.Now), in `reckon zreport simulate` (a virtual
// clock, see Simulate) and in table tests at fixed instants. Maps are never
// ranged, so results do not depend on iteration order.
//
// It is not for transport (the bridge decodes Kafka records into Parts and
// signals workflows; activities publish Aggregates and Changelogs and call
// the operator) nor for storage layouts.
package zreport
