// Package streaming is the speed layer's shell: a franz-go consumer group
// over the raw topics that feeds each assigned partition's records through
// the quality gate and the pure per-partition operator (package
// streaming/operator), and publishes what comes out — panes, rolling
// features, late side output, dead letters — together with the partition's
// operator state and the consumed offsets in one Kafka transaction.
//
// Exactly-once effect: a transaction either commits outputs, state and
// offsets together or none of them. On abort (rebalance, fencing, crash)
// the consumer rewinds to the committed offsets and the operators are
// restored from the state committed with them, so a crash and restart gives
// the same final panes as an uninterrupted run. Redeliveries by producers
// (the same event_id sent twice) are dropped by the operator's dedup, which
// is part of that state. A broker outage is ridden out in process: the
// lost session is replaced by a new one with the same transactional id,
// which aborts the open transaction, and the partitions are restored the
// same way (docs/adr/0033-progress-every-partition-and-broker-outages.md).
//
// It is not for deciding anything about windows or watermarks: that is the
// operator's job, shared with `reckon simulate` and the batch recompute.
package streaming
