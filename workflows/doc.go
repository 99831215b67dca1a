// Package workflows holds reckon's Temporal workflows: deterministic
// orchestration only. No I/O, no time.Now, no goroutines, channels or map
// ranging here; every side effect is an activity (package activities),
// referred to by method value on a nil pointer to the struct that holds
// it (*activities.Archive, *activities.BatchTruth, *activities.ZReport).
package workflows
