package activities

// Error types of activity failures that no retry can fix. Each is the type
// of a temporal.NewNonRetryableApplicationError that an activity (or a
// workflow refusing its input) returns, and the workflows name the ones
// their activities can return in RetryPolicy.NonRetryableErrorTypes, so
// a wrong configuration fails at once instead of after every retry. The
// values are recorded in workflow histories: never change one.
const (
	// ErrTypeConfig: the configuration cannot work — gate rules that do
	// not compile, a raw table the lake refuses, a dependency the wiring
	// did not set. Fixing it takes a new configuration and a restart.
	ErrTypeConfig = "config"
	// ErrTypeCursor: a workflow's cursor lies beyond the end of its
	// partition, so the topic was recreated or truncated: an operator's
	// decision, not something to paper over.
	ErrTypeCursor = "cursor"
	// ErrTypePartition: the topic partition to read does not exist.
	ErrTypePartition = "partition"
	// ErrTypeTruthInput: a batch-truth request that cannot be served — an
	// unknown stream, an empty, unaligned or cross-midnight range, a bad
	// date or time zone, a stream whose lake columns belong to another.
	ErrTypeTruthInput = "TruthInvalidInput"
	// ErrTypeTruthTopic: a topic the batch truth reads does not exist
	// (run `reckon topics apply`).
	ErrTypeTruthTopic = "TruthTopic"
	// ErrTypeTruthSettings: the stream publishes its progress under other
	// window settings than this batch's configuration (CheckHorizon);
	// correcting its panes with other windows would be wrong.
	ErrTypeTruthSettings = "TruthSettingsMismatch"
	// ErrTypeOFDClient: the fiscal operator answered a 4xx other than
	// 404, 408 and 429: our request is wrong.
	ErrTypeOFDClient = "OFDClientError"
	// ErrTypeOFDBadDocument: the operator answered 200 with an unusable
	// document.
	ErrTypeOFDBadDocument = "OFDBadDocument"
	// ErrTypeZReportInput: a Z-report input that cannot be used — a bad
	// business key, a state that does not restore, a publication that
	// cannot be written.
	ErrTypeZReportInput = "ZReportInvalidInput"
	// ErrTypeLakeAccess: the lake's storage refuses access for good —
	// access denied, credentials refused, the bucket gone, a read-only
	// directory (storage.IsPermanent). LakeErrors gives it to any activity
	// failing so; fixing it takes an operator.
	ErrTypeLakeAccess = "LakeAccess"
)
