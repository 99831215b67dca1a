// Package lakecheck accounts for a generator's records in the lake
// (`reckon verify --lake`, docs/adr/0018-continuous-compaction.md): every
// offset the archive has reached is held in exactly one of raw, rejected
// and raw_dropped. It reads the lake and a manifest; it writes nothing.
package lakecheck
