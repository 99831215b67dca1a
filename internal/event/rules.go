package event

import "time"

// GateOptions configures the quality gate. The zero value of each field
// means its default. It maps 1:1 onto the `gate:` section of reckon.yaml.
type GateOptions struct {
	// MaxPayloadBytes rejects records larger than this. Default 1 MiB.
	MaxPayloadBytes int `yaml:"max_payload_bytes"`
	// MaxFutureSkew rejects events whose occurred_at is more than this ahead
	// of arrival, so a skewed clock cannot drag the watermark forward.
	// Default 5m.
	MaxFutureSkew time.Duration `yaml:"max_future_skew"`
	// MaxPastAge rejects events whose occurred_at is more than this before
	// arrival. Default 0: no limit (late events are the batch side's job).
	MaxPastAge time.Duration `yaml:"max_past_age"`
	// AllowUnknownTypes accepts event types without rules (envelope checks
	// still apply). Default false: unknown types are rejected.
	AllowUnknownTypes bool `yaml:"allow_unknown_types"`
	// MaxDepth rejects JSON nested deeper than this. Default 32.
	MaxDepth int `yaml:"max_depth"`
	// Types holds the data rules per event type.
	Types map[string]TypeRules `yaml:"types"`
}

// TypeRules are the data rules of one event type.
type TypeRules struct {
	// Fields maps a data field name (top level of `data`) to its rule.
	Fields map[string]FieldRule `yaml:"fields"`
}

// FieldRule constrains one data field.
type FieldRule struct {
	Required bool `yaml:"required"`
	// Type is one of string, number, integer, boolean, object, array.
	// Empty means any type.
	Type string `yaml:"type"`
	// Pattern is a regular expression the whole string value must match
	// (anchored at both ends). Strings only.
	Pattern string `yaml:"pattern"`
	// Min and Max bound numbers (inclusive); nil means unbounded.
	Min *float64 `yaml:"min"`
	Max *float64 `yaml:"max"`
	// MinLen and MaxLen bound string length in bytes; 0 means unbounded.
	MinLen int `yaml:"min_len"`
	MaxLen int `yaml:"max_len"`
	// Enum lists the allowed string values; empty means any.
	Enum []string `yaml:"enum"`
}
