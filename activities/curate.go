package activities

import (
	"context"

	"reckon/lake"
)

// CurateInput names lake files just written to the summaries table (by
// ArchivePanes) or the truth table (by RecomputeWindows), relative to the
// lake root.
type CurateInput struct {
	Files []string `json:"files"`
}

// CurateWindows brings the curated windows and corrections tables up to
// date with Files (lake.Lake.Curate): it reads only those files and
// rewrites the hour files of the windows they touch. Curating the same
// files again changes nothing, so a retry is harmless
// (docs/adr/0019-curated-tables.md).
func (a *BatchTruth) CurateWindows(ctx context.Context, in CurateInput) (lake.CurateResult, error) {
	res, err := a.Lake.Curate(ctx, in.Files)
	// The result is small; the rewritten files are listed for the UI.
	if len(res.Files) > 50 {
		res.Files = res.Files[:50]
	}
	return res, err
}
