// Package activities holds every side effect of reckon's batch side as
// Temporal activities: reading Kafka offset ranges, writing and scanning the
// Parquet lake, publishing corrections, calling the fiscal operator. Each
// group of activities is a struct holding its dependencies; only package
// workers builds and registers them, and workflows refer to the methods
// through a nil pointer.
package activities
