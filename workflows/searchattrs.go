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
	}
}
