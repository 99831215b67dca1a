// Package config loads reckon's one configuration: a YAML file (the embedded
// deploy/reckon.yaml when none is given), then RECKON_* environment
// overrides, then command-line overrides (--set key=value). Every section is
// an options struct whose zero value means "default"; Validate reports every
// problem at once.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"reckon/internal/event"
)

// Config is the whole of reckon's configuration. Field comments state defaults.
type Config struct {
	Kafka    Kafka             `yaml:"kafka"`
	Temporal Temporal          `yaml:"temporal"`
	Lake     Lake              `yaml:"lake"`
	Topics   Topics            `yaml:"topics"`
	Streams  []Stream          `yaml:"streams"`
	Gate     event.GateOptions `yaml:"gate"`
	Stream   StreamWorker      `yaml:"stream_worker"`
	Dev      Dev               `yaml:"dev"`
	Metrics  Metrics           `yaml:"metrics"`
	ZReport  ZReport           `yaml:"zreport"`
	Batch    Batch             `yaml:"batch"`
	SQL      SQL               `yaml:"sql"`
}

// Kafka is how reckon reaches the broker.
type Kafka struct {
	// Brokers are seed addresses. Default ["127.0.0.1:9092"].
	Brokers []string `yaml:"brokers"`
	// ClientID prefixes every client's id. Default "reckon".
	ClientID string `yaml:"client_id"`
	// SASL authenticates the clients; the zero value means none
	// (security.go, docs/adr/0009-security.md).
	SASL KafkaSASL `yaml:"sasl"`
	// TLS encrypts the connections; the zero value means plaintext.
	TLS TLSConfig `yaml:"tls"`
	// AllowPlaintextCredentials permits SASL without TLS (trusted
	// networks only). Default false: Validate refuses it.
	AllowPlaintextCredentials bool `yaml:"allow_plaintext_credentials"`
}

// Temporal is how reckon reaches the Temporal frontend.
type Temporal struct {
	// Address of the frontend. Default "127.0.0.1:7233".
	Address string `yaml:"address"`
	// Namespace holds reckon's workflows and schedules. Default "default".
	Namespace string `yaml:"namespace"`
	// TaskQueue the batch workers poll. Default "reckon-batch".
	TaskQueue string `yaml:"task_queue"`
	// TLS for the frontend connection; with cert_file/key_file it is
	// mutual TLS. The zero value means plaintext.
	TLS TLSConfig `yaml:"tls"`
	// APIKey is sent as a bearer token (Temporal Cloud, or a cluster with
	// an authorizer). Prefer APIKeyFile. Never printed. Default "".
	APIKey Secret `yaml:"api_key"`
	// APIKeyFile holds the API key (trailing newline ignored); read at
	// connect. Exclusive with APIKey.
	APIKeyFile string `yaml:"api_key_file"`
	// AllowPlaintextCredentials permits an API key without TLS (trusted
	// networks only). Default false: Validate refuses it.
	AllowPlaintextCredentials bool `yaml:"allow_plaintext_credentials"`
}

// Topics names reckon's non-raw topics; raw topics are named per stream.
type Topics struct {
	// Map is the topic map file applied by `reckon topics apply`. Empty
	// means the embedded deploy/topics.yaml.
	Map string `yaml:"map"`
	// Summaries receives panes (compacted). Default "m8-suhu-rangkuman".
	Summaries string `yaml:"summaries"`
	// Features receives rolling features. Default "reckon-features".
	Features string `yaml:"features"`
	// Late is the late side output. Default "reckon-late".
	Late string `yaml:"late"`
	// DLQ is the dead-letter topic. Default "reckon-dlq".
	DLQ string `yaml:"dlq"`
	// ZReportParts carries OFD/DWH/RMS parts. Default "zreport-parts".
	ZReportParts string `yaml:"zreport_parts"`
	// ZReportComplete receives finalized Z-reports. Default "zreport-complete".
	ZReportComplete string `yaml:"zreport_complete"`
	// ZReportIncomplete receives the incomplete-state changelog. Default "zreport-incomplete".
	ZReportIncomplete string `yaml:"zreport_incomplete"`
	// StreamState holds the stream workers' per-partition state snapshots,
	// written in the same transaction as outputs and offsets (compacted).
	// Default "reckon-stream-state".
	StreamState string `yaml:"stream_state"`
	// StreamProgress receives the stream's per-partition progress (offset,
	// watermark, purged-through point), written in the same transaction as
	// outputs and offsets; the batch reads it to know when windows are
	// final (compacted; docs/adr/0015). Default "reckon-stream-progress".
	StreamProgress string `yaml:"stream_progress"`
	// StreamRefresh carries state-refresh records. Each is a too-late
	// event the lake holds, for the owning stream worker to fold into its
	// rolling features (docs/adr/0040-feature-lookups.md). Default
	// "reckon-stream-refresh".
	StreamRefresh string `yaml:"stream_refresh"`
}

// Stream is one windowed stream: a raw topic, how to get key and value from
// its events, and its event-time policy.
type Stream struct {
	// Name identifies the stream in panes and the lake. Required.
	Name string `yaml:"name"`
	// Topic is the raw topic. Required.
	Topic string `yaml:"topic"`
	// EventTypes are the event types this stream aggregates. Required.
	EventTypes []string `yaml:"event_types"`
	// KeyField is the data field holding the entity key. Required.
	KeyField string `yaml:"key_field"`
	// ValueField is the numeric data field aggregated (sum/min/max).
	// Empty: each event counts with value 0.
	ValueField string `yaml:"value_field"`
	// Window is the window size. Default 1h.
	Window time.Duration `yaml:"window"`
	// Hop makes the windows hopping: a window of size Window starts every
	// Hop, and an event counts in each window covering it
	// (docs/adr/0041-hopping-windows.md). It must divide Window. Default 0
	// (or equal to Window): tumbling.
	Hop time.Duration `yaml:"hop"`
	// OutOfOrderness is subtracted from the max event time to get the
	// watermark. Default 5s.
	OutOfOrderness time.Duration `yaml:"out_of_orderness"`
	// AllowedLateness keeps fired windows open for late panes. Default 0.
	AllowedLateness time.Duration `yaml:"allowed_lateness"`
	// IdleTimeout: after this long without records a partition's watermark
	// advances with processing time. Default 1m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// EmitInterval is how often early panes of dirty windows are emitted;
	// 0 disables early panes. Default 0.
	EmitInterval time.Duration `yaml:"emit_interval"`
	// Rolling is the rolling feature size, e.g. 60s; 0 disables features.
	Rolling time.Duration `yaml:"rolling"`
}

// StreamWorker tunes `reckon stream`.
type StreamWorker struct {
	// Group is the consumer group. Default "reckon-stream".
	Group string `yaml:"group"`
	// DedupTTL is how long an event_id is remembered. Default 24h.
	DedupTTL time.Duration `yaml:"dedup_ttl"`
	// DedupMaxEntries bounds the dedup memory per partition. Default 1,000,000.
	DedupMaxEntries int `yaml:"dedup_max_entries"`
	// MaxAttempts is how often a failing record is processed before it goes
	// to the DLQ (docs/requirements.md R-DLQ-2). Default 3.
	MaxAttempts int `yaml:"max_attempts"`
	// Instance names this worker process; its Kafka transactional id is
	// <client_id>-stream-<instance>, so a restarted instance fences its
	// zombie at once. Must be unique among workers of the group and stable
	// across restarts. Default: the host name.
	Instance string `yaml:"instance"`
	// CommitInterval is the longest a transaction (outputs + state + offsets)
	// stays open; consumers reading committed see outputs after at most
	// this. Default 100ms.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// TickInterval is how often processing-time work runs (idle watermark,
	// early panes). Default 250ms.
	TickInterval time.Duration `yaml:"tick_interval"`
	// SessionTimeout is the consumer group session timeout: how long a
	// killed worker's partitions wait before moving to another. Default 45s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// Membership is how the worker joins its consumer group: "static" (a
	// static member named Instance, KIP-345: a restarted worker gets its
	// partitions back at once, without a rebalance or a wait for its old
	// session to expire, and a worker stopped for good hands its partitions
	// on after SessionTimeout) or "dynamic" (every start is a new member:
	// a restart after a crash waits out the old session; a clean stop hands
	// its partitions on at once). Default static.
	Membership string `yaml:"membership"`
	// TransactionTimeout is how long the broker keeps a dead worker's open
	// transaction before aborting it; read-committed consumers of the
	// outputs wait at most this after a crash (a restarted instance with the
	// same name fences it at once). Default 30s.
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`
	// CheckpointInterval and CheckpointRecords: a partition's full operator
	// state is written to the state topic when this much wall time or this
	// many records have passed since its last checkpoint; in between, each
	// transaction writes only a small replay log (docs/adr/0012). A restore
	// re-reads at most this much raw input. Defaults 30s and 500,000.
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	CheckpointRecords  int64         `yaml:"checkpoint_records"`
	// LatePanes says how late panes are published: "per_transaction"
	// (default) publishes one pane per window per transaction, the latest,
	// its version counting every late event (superseded versions are
	// skipped, as compaction would); "per_event" publishes every one.
	// docs/adr/0013.
	LatePanes string `yaml:"late_panes"`
	// Parallelism is how many assigned partitions a worker processes at
	// once (each partition's records stay in order; partitions share
	// nothing). Default: the number of CPUs Go uses (GOMAXPROCS).
	Parallelism int `yaml:"parallelism"`
	// ServeAddr is the host:port of the feature lookups. They are
	// GET /v1/features/<stream>/<key> and POST /v1/features/<stream>
	// (docs/adr/0040-feature-lookups.md). Default "": off. `reckon dev`
	// sets 127.0.0.1:8290 (or a free port) and prints it. A port the
	// worker cannot listen on turns lookups off, not the stream.
	ServeAddr string `yaml:"serve_addr"`
	// ServeAdvertise is where other workers forward lookups to. It is
	// published in this worker's progress records. Default "": serve_addr, with an unspecified host replaced by the
	// host name.
	ServeAdvertise string `yaml:"serve_advertise"`
	// ServeAuth authenticates lookup clients with a bearer token; the zero
	// value means none (only on a loopback address or a trusted network).
	ServeAuth LookupAuth `yaml:"serve_auth"`
	// ServeTLS encrypts the lookups; with client_ca_file it is mutual TLS.
	// Workers forwarding to each other trust cert_file's chain. The zero
	// value means plaintext.
	ServeTLS ServerTLS `yaml:"serve_tls"`
	// ServeAllowPlaintextCredentials permits a token without TLS. That is
	// on a non-loopback serve_addr, for trusted networks only. Default
	// false: Validate refuses it.
	ServeAllowPlaintextCredentials bool `yaml:"serve_allow_plaintext_credentials"`
}

// LookupAuth is how lookup clients authenticate: a bearer token. The zero
// value means no authentication.
type LookupAuth struct {
	// Token is accepted as "Authorization: Bearer <token>". Prefer
	// TokenFile. Never printed. Default "".
	Token Secret `yaml:"token"`
	// TokenFile holds the token, read at start. A trailing newline is
	// ignored. Exclusive with Token.
	TokenFile string `yaml:"token_file"`
}

// ResolveToken returns the token from Token or TokenFile ("" when none).
func (a LookupAuth) ResolveToken() (Secret, error) {
	return resolveSecret("stream_worker.serve_auth.token", a.Token, a.TokenFile)
}

// Late pane publication modes (StreamWorker.LatePanes).
const (
	LatePanesPerTransaction = "per_transaction"
	LatePanesPerEvent       = "per_event"
)

// Dev tunes the embedded stack of `reckon dev`.
type Dev struct {
	// Dir holds the broker data, Temporal's SQLite file and the lake (when
	// lake.root is left at its default, `reckon dev` puts the lake in
	// Dir/lake). Default "./.reckon".
	Dir string `yaml:"dir"`
	// KafkaPort of the embedded broker. Default 9092.
	KafkaPort int `yaml:"kafka_port"`
	// TemporalPort of the dev server frontend. Default 7233.
	TemporalPort int `yaml:"temporal_port"`
	// UIPort of the Temporal UI. Default 8233.
	UIPort int `yaml:"ui_port"`
	// OFDPort of the simulated fiscal data operator (zreport ofd-sim).
	// The dev stack points zreport.ofd_url and zreport.ofd_sim_addr at
	// 127.0.0.1 on it, so two dev stacks on one host differ in their dev
	// ports only. Default 8280.
	OFDPort int `yaml:"ofd_port"`
	// LookupPort is where `reckon dev` serves feature lookups. It sets
	// stream_worker.serve_addr to 127.0.0.1:<port>, or a free port when it
	// is taken. Default 8290.
	LookupPort int `yaml:"lookup_port"`
	// TemporalBin is the pinned temporal CLI. Default "./bin/temporal".
	TemporalBin string `yaml:"temporal_bin"`
	// GenerateRate is the generator's events/s in the dev stack; 0 disables it. Default 20.
	GenerateRate int `yaml:"generate_rate"`
	// S3 runs a real S3 server (SeaweedFS) and puts the lake on it. The
	// server (dev.weed_bin) is a component of `reckon dev`, its data in
	// Dir/s3; lake.root names the bucket and prefix (s3://reckon-lake/lake
	// when left at its default) and lake.s3 gets the server's endpoint and
	// identity, for every command given dev.s3. Default false
	// (docs/adr/0035-real-s3-server.md).
	S3 bool `yaml:"s3"`
	// S3Port of that S3 server. Default 8333.
	S3Port int `yaml:"s3_port"`
	// WeedBin is the pinned SeaweedFS binary (`make weed`). Default "./bin/weed".
	WeedBin string `yaml:"weed_bin"`
	// Demo adds DemoStreams to streams (`make dev` runs `reckon dev --set
	// dev.demo=true`, which passes it to every component). Default false:
	// tests, tools and production configs keep their own streams.
	Demo bool `yaml:"demo"`
	// DemoStreams are the dev stack's demonstration streams (other window
	// kinds on the generator's records), added to streams when Demo is set
	// and validated as streams then.
	DemoStreams []Stream `yaml:"demo_streams"`
}

// The lake on dev.s3's server: the bucket and prefix when lake.root is
// left at its default, and the one identity the server accepts.
const (
	DevS3Root            = "s3://reckon-lake/lake"
	DevS3AccessKeyID     = "reckon"
	DevS3SecretAccessKey = "reckon-dev-secret"
)

// devS3Lake points the lake at dev.s3's server (when dev.s3 is on and
// lake.s3 names no endpoint), so `reckon dev` and every command beside it
// given the same dev.s3 use it: lake.root DevS3Root when left at its
// default, the loopback endpoint on dev.s3_port, the dev identity, and
// plaintext credentials (loopback only).
func (c *Config) devS3Lake() {
	if !c.Dev.S3 || c.Lake.S3.Endpoint != "" {
		return
	}
	if c.Lake.Root == "./.reckon/lake" {
		c.Lake.Root = DevS3Root
	}
	if !c.Lake.IsS3() {
		return // Validate says lake.root must be s3://
	}
	c.Lake.S3.Endpoint = "http://127.0.0.1:" + strconv.Itoa(c.Dev.S3Port)
	c.Lake.S3.Region = "us-east-1"
	if c.Lake.S3.AccessKeyID == "" && c.Lake.S3.SecretAccessKey == "" && c.Lake.S3.SecretAccessKeyFile == "" {
		c.Lake.S3.AccessKeyID, c.Lake.S3.SecretAccessKey = DevS3AccessKeyID, DevS3SecretAccessKey
	}
	c.Lake.S3.AllowPlaintextCredentials = true
}

// Metrics is the Prometheus endpoint of each process.
type Metrics struct {
	// Addr to listen on; empty disables. Default "127.0.0.1:9464" (dev
	// processes use consecutive ports).
	Addr string `yaml:"addr"`
}

// ZReport tunes Z-report entity workflows.
type ZReport struct {
	// OFDRequestAfter is how long after shift close the OFD document is
	// requested from the operator. Default 144h (day six).
	OFDRequestAfter time.Duration `yaml:"ofd_request_after"`
	// Retention is how long to wait for missing DWH/RMS parts before
	// finalizing as incomplete. Default 720h (30 days).
	Retention time.Duration `yaml:"retention"`
	// OFDURL is the operator's HTTP API base URL. Default "http://127.0.0.1:8280".
	OFDURL string `yaml:"ofd_url"`
	// OFDRetry: after the operator answered 404 (not yet available) or a
	// request failed for good, ask again this much later, while before the
	// retention. Default 24h.
	OFDRetry time.Duration `yaml:"ofd_retry"`
	// OFDTimeout bounds one HTTP request to the operator. Default 10s.
	OFDTimeout time.Duration `yaml:"ofd_timeout"`
	// OFDAttempts is how many times one request is tried on 5xx, 408, 429
	// and network errors (exponential backoff from OFDBackoff, doubling,
	// capped at 1m) before it counts as failed. Default 5.
	OFDAttempts int `yaml:"ofd_attempts"`
	// OFDBackoff is the first retry interval. Default 1s.
	OFDBackoff time.Duration `yaml:"ofd_backoff"`
	// Linger keeps a final entity open this long after its last change (and
	// at least until the retention) so late parts become new versions in the
	// same run. Default 1h.
	Linger time.Duration `yaml:"linger"`
	// HistoryLimit: an entity continues as new past this many history
	// events (or when the server suggests it). Default 5000.
	HistoryLimit int `yaml:"history_limit"`
	// BridgeGroup is the consumer group of the parts bridge. Default "reckon-zreport".
	BridgeGroup string `yaml:"bridge_group"`
	// BridgeConcurrency is how many signals the bridge has in flight (parts
	// of one business key stay in order). Default 16.
	BridgeConcurrency int `yaml:"bridge_concurrency"`
	// BridgeLinger: after a poll of the parts topic came back short, the
	// bridge keeps polling this long so that parts of one business key
	// arriving close together go to its entity in one signal (at most 5s;
	// docs/adr/0021-zreport-coalescing.md). Default 250ms.
	BridgeLinger time.Duration `yaml:"bridge_linger"`
	// BridgeRedriveInterval: how often the bridge re-drives failed runs.
	//
	// The bridge looks for entity runs that ended without finalizing
	// (terminated, failed, timed out) and sends their parts again
	// (docs/adr/0037-zreport-parts-recoverable.md). Default 1m.
	BridgeRedriveInterval time.Duration `yaml:"bridge_redrive_interval"`
	// BridgeInstance names this batch worker in the bridge's group.
	// Unique per batch worker, stable across its restarts
	// (docs/adr/0016-static-group-membership.md). Default: the host name,
	// as stream_worker.instance.
	BridgeInstance string `yaml:"bridge_instance"`
	// BridgeMembership is how the bridge joins its group: static or
	// dynamic. Static: a
	// member named BridgeInstance (KIP-345); a restart after a crash takes
	// its partitions back at once. Dynamic: every start is a new member; a
	// restart after kill -9 waits out the old member's 45 s session.
	// Default "static".
	BridgeMembership string `yaml:"bridge_membership"`
	// OFDSimAddr overrides the listen address of `reckon zreport ofd-sim`;
	// empty means the host:port of OFDURL.
	OFDSimAddr string `yaml:"ofd_sim_addr"`
	// OFDSimDocuments is a JSONL file of OFD documents (Z-report part
	// envelopes, e.g. `reckon generate --out`) the simulator serves first.
	// Default "" (none).
	OFDSimDocuments string `yaml:"ofd_sim_documents"`
	// OFDSimGeneratorSeed and OFDSimGeneratorKeys: the simulator answers
	// as the operator of `reckon generate --scenario fiscal --seed S --keys
	// K` would. Defaults 1 and 20 (the generator's defaults).
	OFDSimGeneratorSeed int64 `yaml:"ofd_sim_generator_seed"`
	OFDSimGeneratorKeys int   `yaml:"ofd_sim_generator_keys"`
	// OFDSimDelay delays every answer of the simulator. Default 0.
	OFDSimDelay time.Duration `yaml:"ofd_sim_delay"`
	// OFDSimMissingFraction of business keys the simulator never has a
	// document for (404), chosen by a hash of the key. Default 0.
	OFDSimMissingFraction float64 `yaml:"ofd_sim_missing_fraction"`
	// OFDSimFailureFraction of requests the simulator answers 503. Default 0.
	OFDSimFailureFraction float64 `yaml:"ofd_sim_failure_fraction"`
}

// StreamByName returns the stream named n.
func (c *Config) StreamByName(n string) (Stream, bool) {
	for _, s := range c.Streams {
		if s.Name == n {
			return s, true
		}
	}
	return Stream{}, false
}

func (c *Config) fillDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(i *int, v int) {
		if *i == 0 {
			*i = v
		}
	}
	if len(c.Kafka.Brokers) == 0 {
		c.Kafka.Brokers = []string{"127.0.0.1:9092"}
	}
	def(&c.Kafka.ClientID, "reckon")
	def(&c.Temporal.Address, "127.0.0.1:7233")
	def(&c.Temporal.Namespace, "default")
	def(&c.Temporal.TaskQueue, "reckon-batch")
	def(&c.Lake.Root, "./.reckon/lake")
	def(&c.Topics.Summaries, "m8-suhu-rangkuman")
	def(&c.Topics.Features, "reckon-features")
	def(&c.Topics.Late, "reckon-late")
	def(&c.Topics.DLQ, "reckon-dlq")
	def(&c.Topics.ZReportParts, "zreport-parts")
	def(&c.Topics.ZReportComplete, "zreport-complete")
	def(&c.Topics.ZReportIncomplete, "zreport-incomplete")
	def(&c.Topics.StreamState, "reckon-stream-state")
	def(&c.Topics.StreamProgress, "reckon-stream-progress")
	def(&c.Topics.StreamRefresh, "reckon-stream-refresh")
	for i := range c.Streams {
		s := &c.Streams[i]
		defDur(&s.Window, time.Hour)
		defDur(&s.OutOfOrderness, 5*time.Second)
		defDur(&s.IdleTimeout, time.Minute)
	}
	defInt(&c.Gate.MaxPayloadBytes, 1<<20)
	defDur(&c.Gate.MaxFutureSkew, 5*time.Minute)
	defInt(&c.Gate.MaxDepth, 32)
	def(&c.Stream.Group, "reckon-stream")
	defDur(&c.Stream.DedupTTL, 24*time.Hour)
	defInt(&c.Stream.DedupMaxEntries, 1_000_000)
	defInt(&c.Stream.MaxAttempts, 3)
	if c.Stream.Instance == "" {
		c.Stream.Instance = hostInstance()
	}
	defDur(&c.Stream.CommitInterval, 100*time.Millisecond)
	defDur(&c.Stream.TickInterval, 250*time.Millisecond)
	defDur(&c.Stream.CheckpointInterval, 30*time.Second)
	if c.Stream.CheckpointRecords == 0 {
		c.Stream.CheckpointRecords = 500_000
	}
	def(&c.Stream.LatePanes, LatePanesPerTransaction)
	defInt(&c.Stream.Parallelism, runtime.GOMAXPROCS(0))
	defDur(&c.Stream.SessionTimeout, 45*time.Second)
	def(&c.Stream.Membership, "static")
	defDur(&c.Stream.TransactionTimeout, 30*time.Second)
	def(&c.Dev.Dir, "./.reckon")
	defInt(&c.Dev.KafkaPort, 9092)
	defInt(&c.Dev.TemporalPort, 7233)
	defInt(&c.Dev.UIPort, 8233)
	defInt(&c.Dev.OFDPort, 8280)
	defInt(&c.Dev.LookupPort, 8290)
	def(&c.Dev.TemporalBin, "./bin/temporal")
	defInt(&c.Dev.S3Port, 8333)
	def(&c.Dev.WeedBin, "./bin/weed")
	c.devS3Lake()
	defDur(&c.ZReport.OFDRequestAfter, 144*time.Hour)
	defDur(&c.ZReport.Retention, 720*time.Hour)
	def(&c.ZReport.OFDURL, "http://127.0.0.1:8280")
	defDur(&c.ZReport.OFDRetry, 24*time.Hour)
	defDur(&c.ZReport.OFDTimeout, 10*time.Second)
	defInt(&c.ZReport.OFDAttempts, 5)
	defDur(&c.ZReport.OFDBackoff, time.Second)
	defDur(&c.ZReport.Linger, time.Hour)
	defInt(&c.ZReport.HistoryLimit, 5000)
	def(&c.ZReport.BridgeGroup, "reckon-zreport")
	defInt(&c.ZReport.BridgeConcurrency, 16)
	defDur(&c.ZReport.BridgeLinger, 250*time.Millisecond)
	defDur(&c.ZReport.BridgeRedriveInterval, time.Minute)
	if c.ZReport.BridgeInstance == "" {
		c.ZReport.BridgeInstance = hostInstance()
	}
	def(&c.ZReport.BridgeMembership, "static")
	if c.ZReport.OFDSimGeneratorSeed == 0 {
		c.ZReport.OFDSimGeneratorSeed = 1
	}
	defInt(&c.ZReport.OFDSimGeneratorKeys, 20)
	c.Batch.fillDefaults()
	c.Lake.Compaction.fillDefaults()
	defDur(&c.Lake.RejectedRetention, 168*time.Hour)
	c.SQL.fillDefaults()
	def(&c.SQL.CacheDir, filepath.Join(c.Dev.Dir, "sql-cache"))
}

// hostInstance is the default name of a group member: the host name, or
// "0" when it has none.
func hostInstance() string {
	if h, _ := os.Hostname(); h != "" {
		return h
	}
	return "0"
}

// Validate reports every problem at once, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: "+format, a...))
	}
	if len(c.Kafka.Brokers) == 0 {
		bad("kafka.brokers: at least one broker is required")
	}
	for i, b := range c.Kafka.Brokers {
		if !strings.Contains(b, ":") {
			bad("kafka.brokers[%d]: %q is not host:port", i, b)
		}
	}
	if c.Temporal.Address == "" {
		bad("temporal.address: required")
	}
	errs = append(errs, validateSecurity(c)...)
	errs = append(errs, validateLake(c.Lake)...)
	if c.Dev.S3 && !c.Lake.IsS3() {
		bad("dev.s3: the lake goes on the dev S3 server: lake.root must be s3://bucket[/prefix] "+
			"or left at its default, not %q", c.Lake.Root)
	}
	c.Lake.Compaction.validate(bad)
	names := map[string]bool{}
	for i, s := range c.Streams {
		at := fmt.Sprintf("streams[%d]", i)
		if s.Name == "" {
			bad("%s.name: required", at)
		} else if names[s.Name] {
			bad("%s.name: %q is used twice", at, s.Name)
		} else if strings.ContainsAny(s.Name, "|/\\=") {
			bad("%s.name: %q must not contain | / \\ or =", at, s.Name)
		}
		names[s.Name] = true
		if s.Topic == "" {
			bad("%s.topic: required", at)
		}
		if len(s.EventTypes) == 0 {
			bad("%s.event_types: at least one is required", at)
		}
		if s.KeyField == "" {
			bad("%s.key_field: required", at)
		}
		if s.Window < 0 || (s.Window > 0 && (24*time.Hour)%s.Window != 0) {
			bad("%s.window: %v must be positive and divide a day", at, s.Window)
		}
		switch {
		case s.Hop < 0:
			bad("%s.hop: %v must not be negative", at, s.Hop)
		case s.Hop == 0 || s.Window <= 0:
		case s.Hop > s.Window:
			bad("%s.hop: %v is longer than the window %v", at, s.Hop, s.Window)
		case s.Window%s.Hop != 0:
			bad("%s.hop: %v does not divide the window %v", at, s.Hop, s.Window)
		}
		if s.OutOfOrderness < 0 {
			bad("%s.out_of_orderness: must not be negative", at)
		}
		if s.AllowedLateness < 0 {
			bad("%s.allowed_lateness: must not be negative", at)
		}
		if s.IdleTimeout < 0 {
			bad("%s.idle_timeout: must not be negative", at)
		}
		if s.EmitInterval < 0 {
			bad("%s.emit_interval: must not be negative", at)
		}
		if s.Rolling < 0 {
			bad("%s.rolling: must not be negative", at)
		}
		for _, t := range s.EventTypes {
			if _, ok := c.Gate.Types[t]; !ok && !c.Gate.AllowUnknownTypes {
				bad("%s.event_types: %q has no rules under gate.types", at, t)
			}
		}
	}
	if c.Gate.MaxPayloadBytes < 0 {
		bad("gate.max_payload_bytes: must not be negative")
	}
	for t, r := range c.Gate.Types {
		for f, fr := range r.Fields {
			switch fr.Type {
			case "", "string", "number", "integer", "boolean", "object", "array":
			default:
				bad("gate.types.%s.fields.%s.type: %q is not one of string, number, integer, boolean, object, array", t, f, fr.Type)
			}
			if fr.Min != nil && fr.Max != nil && *fr.Min > *fr.Max {
				bad("gate.types.%s.fields.%s: min %v > max %v", t, f, *fr.Min, *fr.Max)
			}
		}
	}
	if m := c.Stream.Membership; m != "static" && m != "dynamic" {
		bad("stream_worker.membership: %q must be static or dynamic", m)
	}
	if m := c.ZReport.BridgeMembership; m != "static" && m != "dynamic" {
		bad("zreport.bridge_membership: %q must be static or dynamic", m)
	}
	if c.Stream.MaxAttempts < 1 {
		bad("stream_worker.max_attempts: must be at least 1")
	}
	if c.Stream.DedupMaxEntries < 1 {
		bad("stream_worker.dedup_max_entries: must be at least 1")
	}
	if c.Stream.CheckpointInterval < 0 {
		bad("stream_worker.checkpoint_interval: must not be negative")
	}
	if c.Stream.CheckpointRecords < 1 {
		bad("stream_worker.checkpoint_records: must be at least 1")
	}
	if c.Stream.Parallelism < 1 {
		bad("stream_worker.parallelism: must be at least 1")
	}
	if c.Stream.LatePanes != LatePanesPerTransaction && c.Stream.LatePanes != LatePanesPerEvent {
		bad("stream_worker.late_panes: %q is not %s or %s", c.Stream.LatePanes, LatePanesPerTransaction, LatePanesPerEvent)
	}
	c.Stream.validateServe(bad, func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrSecurity}, a...)...))
	})
	for _, p := range []struct {
		name string
		v    int
	}{
		{"dev.kafka_port", c.Dev.KafkaPort}, {"dev.temporal_port", c.Dev.TemporalPort}, {"dev.ui_port", c.Dev.UIPort},
		{"dev.ofd_port", c.Dev.OFDPort}, {"dev.s3_port", c.Dev.S3Port}, {"dev.lookup_port", c.Dev.LookupPort},
	} {
		if p.v < 1 || p.v > 65535 {
			bad("%s: %d is not a port", p.name, p.v)
		}
	}
	c.Batch.validate(bad)
	c.SQL.validate(bad, func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrSecurity}, a...)...))
	})
	// The gate checks its own rules (patterns compile, type names, field
	// names, limits): report them here, not when a worker starts.
	if _, err := event.NewGate(c.Gate); err != nil {
		bad("gate: %v", err)
	}
	return errors.Join(errs...)
}
