package workflows

import "go.temporal.io/sdk/temporal"

// Search attributes reckon sets so operators can find workflows in the
// Temporal UI (e.g. `ReckonStream = "suhu" AND ReckonStatus = "corrected"`).
// The dev server registers them at start; on a cluster, `temporal operator
// search-attribute create` them once (deploy/README.md).
var (
	SAStream      = temporal.NewSearchAttributeKeyKeyword("ReckonStream")
	SATopic       = temporal.NewSearchAttributeKeyKeyword("ReckonTopic")
	SAPartition   = temporal.NewSearchAttributeKeyInt64("ReckonPartition")
	SADate        = temporal.NewSearchAttributeKeyKeyword("ReckonDate")
	SAStatus      = temporal.NewSearchAttributeKeyKeyword("ReckonStatus")
	SACorrected   = temporal.NewSearchAttributeKeyInt64("ReckonCorrected")
	SAFiscalDrive = temporal.NewSearchAttributeKeyKeyword("ReckonFiscalDrive")
	// SAShift is a Z-report's shift number in decimal (with SAFiscalDrive
	// its business key; SADate holds its shift close date). A Keyword, not
	// an Int: the dev server's SQL visibility allows only 3 custom Int
	// attributes, and operators look shifts up by equality.
	SAShift = temporal.NewSearchAttributeKeyKeyword("ReckonShift")
	// SAWindowStart is the first window start a recompute covers.
	SAWindowStart = temporal.NewSearchAttributeKeyTime("ReckonWindowStart")
	// SAChecked is how many windows a recompute, reconciliation or replay
	// checked against the truth (SACorrected: how many it corrected).
	SAChecked = temporal.NewSearchAttributeKeyInt64("ReckonChecked")
	// SAClosedThrough is a compaction workflow's closed-through point:
	// every hour of its topic ending at or before it is compacted or due
	// (docs/adr/0018-continuous-compaction.md).
	SAClosedThrough = temporal.NewSearchAttributeKeyTime("ReckonClosedThrough")
)

// SearchAttributes lists every reckon search attribute as name=Type, the
// form `temporal server start-dev --search-attribute` takes.
func SearchAttributes() []string {
	return []string{
		"ReckonStream=Keyword",
		"ReckonTopic=Keyword",
		"ReckonPartition=Int",
		"ReckonDate=Keyword",
		"ReckonStatus=Keyword",
		"ReckonCorrected=Int",
		"ReckonFiscalDrive=Keyword",
		"ReckonShift=Keyword",
		"ReckonWindowStart=Datetime",
		"ReckonChecked=Int",
		"ReckonClosedThrough=Datetime",
	}
}
