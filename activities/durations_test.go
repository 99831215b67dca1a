package activities_test

import (
	"testing"

	"reckon/activities"
	"reckon/internal/testing/durationjson"
)

// TestActivityInputDurationsReadable: the activity inputs that carry a
// duration write it as a string, as the Temporal UI's history then shows
// it, and read the nanoseconds of histories recorded before.
func TestActivityInputDurationsReadable(t *testing.T) {
	durationjson.Check(t, &activities.HorizonInput{}, &activities.ArchiveRangeInput{}, &activities.ReadLateInput{})
}
