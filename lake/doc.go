// Package lake is reckon's Parquet lake: the table schemas (raw events,
// rejected records, summaries), the hive layout and file naming, the atomic
// idempotent writer the archiver calls, the archive progress files, the
// reader that scans a topic over an event-time range and aggregates it per
// key and window with event.Agg, and compaction: of closed hours into large
// files without duplicates, and of open hours' many small files
// (docs/adr/0018-continuous-compaction.md).
//
// Layout under the lake root (every directory and file name is derived from
// topic, partition, offsets and times, never from event keys):
//
//	raw/topic=<t>/event_date=YYYY-MM-DD/event_hour=HH/<t>-<partition>-<firstOffset>-<lastOffset>.parquet
//	raw/topic=<t>/event_date=YYYY-MM-DD/event_hour=HH/<t>-c<generation>-<n>.parquet   (a closed hour, compacted)
//	raw_dropped/topic=<t>/event_date=YYYY-MM-DD/event_hour=HH/<t>-c<generation>.parquet
//	rejected/topic=<t>/ingest_date=YYYY-MM-DD/<t>-<partition>-<firstOffset>-<lastOffset>.parquet
//	summaries/stream=<s>/window_date=YYYY-MM-DD/<name>.parquet
//	truth/stream=<s>/window_date=YYYY-MM-DD/<name>.parquet
//	windows/stream=<s>/window_date=YYYY-MM-DD/windows-HH.parquet      (curated)
//	corrections/stream=<s>/window_date=YYYY-MM-DD/corrections-HH.parquet (curated)
//	features/stream=<s>/event_date=YYYY-MM-DD/<t>-<partition>-<firstOffset>-<lastOffset>.parquet
//	_progress/topic=<t>/partition=<p>.json
//	_progress/topic=<t>/partition=<p>.step.json   (a features archive step's range, ADR 0036)
//
// docs/lake.md documents every table for analysts.
//
// Names starting with "." or "_" are hidden: temporary files while a write
// is in flight and the progress files. DuckDB, Spark and pandas globs such as
// raw/**/*.parquet never see them.
//
// Files are written with zstd, data page v1, bounded row groups and
// TIMESTAMP(MICROS, isAdjustedToUTC=true) timestamps, and become visible
// only complete. The lake lives in a local directory or under an
// s3://bucket/prefix on S3-compatible object storage
// (docs/adr/0011-lake-object-storage.md), with the same keys on both: on
// disk a file goes to a hidden temporary name that is fsynced, renamed into
// place and made durable by fsyncing the directory; on S3 its one PUT (or
// the completion of its multipart upload) is the commit. Writing the same
// offset range again yields the same file names, so a retried archive
// activity replaces files instead of duplicating them.
//
// Every method that reaches storage takes a context.Context and honours it:
// on S3 cancelling it aborts the request in flight, on a directory each file
// operation checks it first (and a long write at every buffer flush). A call
// cut short returns an error wrapping ctx.Err() and, like any failed write,
// leaves no partial file visible.
//
// The storage itself (the interface, the directory and the S3 stores,
// retries) is package lake/storage (docs/adr/0039-lake-storage-package.md).
// Options.Wrap wraps it, inside the retries; the wiring puts the fault
// injector of lake/storage/errorfs there for tests and `make chaos`
// (docs/adr/0022-lake-fault-injection.md). storage.IsPermanent tells a
// storage failure no retry can fix (access denied, the bucket gone) from a
// transient one. Transient failures are retried inside the lake, a bounded
// number of times with backoff (Options.Retry, lake/storage/retry.go), and
// counted per lake (StorageStats).
//
// Package lake does not talk to Kafka or Temporal; the archive activities
// read offset ranges and hand the records to a RawWriter.
package lake
