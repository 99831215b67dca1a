// Package workers is reckon's wiring: the `reckon` command line, config
// loading, process supervision for `reckon dev`, and registration of
// workflows and activities. It holds no domain logic of its own.
package workers
