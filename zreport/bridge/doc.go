// Package bridge carries Z-report parts from Kafka to their entity
// workflows: a franz-go consumer group on the parts topic checks each
// record with the quality gate and sends the valid parts of each business
// key found in one poll (and in a short linger after it, Options.Linger)
// in one SignalWithStartWorkflow of workflow zreport/<fiscal_drive>/<shift>
// (signal zreport.parts, the parts in partition order;
// docs/adr/0021-zreport-coalescing.md).
// Records the gate rejects go to the dead-letter topic with their original
// bytes and reason headers (a prefix of the bytes when they and the headers
// would not fit the topic's record limit, event.DeadLetter.Record). Offsets are committed only after Temporal
// accepted every signal of the batch (and the DLQ acknowledged every dead
// letter), so a crash redelivers, and the workflow's per-source event_id
// dedup turns redelivery into a counted duplicate. A batch Temporal keeps
// rejecting as invalid is sent again part by part, so only the parts it
// rejects alone are dead-lettered.
//
// Parts of one business key are signalled in partition order (a key's
// signals one after another), because order matters for corrected
// resends; different keys are signalled concurrently (Options.Concurrency
// goroutines taking the batch's keys in turn, so a slow key holds up only
// itself).
//
// A committed part lives on only in its entity run, so the bridge also
// sweeps (Sweep, every Options.RedriveInterval) for runs that ended
// without finalizing — terminated, failed, timed out — and sends what each
// held, read from its history, to a new run or to the run started since
// (docs/adr/0037-zreport-parts-recoverable.md).
//
// It is not the place for Z-report decisions (package zreport) or their
// side effects (package activities).
package bridge
