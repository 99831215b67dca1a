// Package deploy holds reckon's deployable defaults: the documented default
// configuration and the topic map. They are embedded in the binary so that
// `reckon` runs from any directory with exactly the defaults documented here.
package deploy

import _ "embed"

// DefaultConfig is deploy/reckon.yaml.
//
//go:embed reckon.yaml
var DefaultConfig []byte

// DefaultTopics is deploy/topics.yaml.
//
//go:embed topics.yaml
var DefaultTopics []byte
