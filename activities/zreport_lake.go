package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"reckon/lake"
	"reckon/zreport"
)

// The zreports table of the lake: one file per final version,
//
//	<lake>/zreports/close_date=YYYY-MM-DD/<fiscal_drive>-<shift>-v<version>.parquet
//
// close_date is shift_closed_at's UTC date (a hive partition: DuckDB's
// read_parquet('<lake>/zreports/**/*.parquet', hive_partitioning=true)
// adds it as a column). Readers keep the highest version per
// (fiscal_drive, shift). The name is built only from a validated key (16
// digits, a positive shift) and version, so no input can escape the
// directory.
const zreportsDir = "zreports"

// ZReportRow is the zreports table's schema, one row a file; timestamps are
// INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true). Absent sources are NULL.
// Exported for readers of the table (the SQL endpoint's tests write it).
type ZReportRow struct {
	FiscalDrive     string   `parquet:"fiscal_drive"`
	Shift           int64    `parquet:"shift"`
	Version         int64    `parquet:"version"`
	Status          string   `parquet:"status,dict"`
	ShiftClosedAt   int64    `parquet:"shift_closed_at,timestamp(microsecond)"`
	FinalizedAt     int64    `parquet:"finalized_at,timestamp(microsecond)"`
	Reason          string   `parquet:"reason"`
	OFDReceipts     *int64   `parquet:"ofd_receipts_count,optional"`
	OFDTotal        *float64 `parquet:"ofd_total_amount,optional"`
	OFDEventID      *string  `parquet:"ofd_event_id,optional"`
	DWHReceipts     *int64   `parquet:"dwh_receipts_count,optional"`
	DWHTotal        *float64 `parquet:"dwh_total_amount,optional"`
	DWHEventID      *string  `parquet:"dwh_event_id,optional"`
	RMSReceipts     *int64   `parquet:"rms_receipts_count,optional"`
	RMSTotal        *float64 `parquet:"rms_total_amount,optional"`
	RMSEventID      *string  `parquet:"rms_event_id,optional"`
	Missing         string   `parquet:"missing"` // comma-separated sources
	OFDDuplicates   int64    `parquet:"ofd_duplicates"`
	DWHDuplicates   int64    `parquet:"dwh_duplicates"`
	RMSDuplicates   int64    `parquet:"rms_duplicates"`
	OFDCorrections  int64    `parquet:"ofd_corrections"`
	DWHCorrections  int64    `parquet:"dwh_corrections"`
	RMSCorrections  int64    `parquet:"rms_corrections"`
	DifferencesJSON string   `parquet:"differences"` // JSON array of zreport.Difference
	SchemaVersion   int32    `parquet:"schema_version"`
}

const zreportSchemaVersion = 1

func zreportRowOf(a *zreport.Aggregate) (ZReportRow, error) {
	diffs, err := json.Marshal(a.Differences)
	if err != nil {
		return ZReportRow{}, err
	}
	missing := make([]string, len(a.Missing))
	for i, m := range a.Missing {
		missing[i] = string(m)
	}
	r := ZReportRow{
		FiscalDrive: a.FiscalDrive, Shift: a.Shift, Version: a.Version, Status: string(a.Status),
		ShiftClosedAt: a.ShiftClosedAt.UnixMicro(), FinalizedAt: a.FinalizedAt.UnixMicro(), Reason: a.Reason,
		Missing:       strings.Join(missing, ","),
		OFDDuplicates: a.Duplicates.OFD, DWHDuplicates: a.Duplicates.DWH, RMSDuplicates: a.Duplicates.RMS,
		OFDCorrections: a.Corrections.OFD, DWHCorrections: a.Corrections.DWH, RMSCorrections: a.Corrections.RMS,
		DifferencesJSON: string(diffs), SchemaVersion: zreportSchemaVersion,
	}
	set := func(f *zreport.SourceFigures, rc **int64, tot **float64, id **string) {
		if f == nil {
			return
		}
		n, x, s := f.Receipts, f.Total, f.EventID
		*rc, *tot, *id = &n, &x, &s
	}
	set(a.Sources.OFD, &r.OFDReceipts, &r.OFDTotal, &r.OFDEventID)
	set(a.Sources.DWH, &r.DWHReceipts, &r.DWHTotal, &r.DWHEventID)
	set(a.Sources.RMS, &r.RMSReceipts, &r.RMSTotal, &r.RMSEventID)
	return r, nil
}

func (r *ZReportRow) aggregate() (*zreport.Aggregate, error) {
	a := &zreport.Aggregate{
		FiscalDrive: r.FiscalDrive, Shift: r.Shift, Version: r.Version, Status: zreport.Status(r.Status),
		ShiftClosedAt: time.UnixMicro(r.ShiftClosedAt).UTC(), FinalizedAt: time.UnixMicro(r.FinalizedAt).UTC(),
		Reason:      r.Reason,
		Missing:     []zreport.Source{},
		Duplicates:  zreport.Counts{OFD: r.OFDDuplicates, DWH: r.DWHDuplicates, RMS: r.RMSDuplicates},
		Corrections: zreport.Counts{OFD: r.OFDCorrections, DWH: r.DWHCorrections, RMS: r.RMSCorrections},
	}
	if r.Missing != "" {
		for _, m := range strings.Split(r.Missing, ",") {
			a.Missing = append(a.Missing, zreport.Source(m))
		}
	}
	if err := json.Unmarshal([]byte(r.DifferencesJSON), &a.Differences); err != nil {
		return nil, fmt.Errorf("zreport: lake row differences: %w", err)
	}
	get := func(rc *int64, tot *float64, id *string) *zreport.SourceFigures {
		if rc == nil || tot == nil || id == nil {
			return nil
		}
		return &zreport.SourceFigures{Figures: zreport.Figures{Receipts: *rc, Total: *tot}, EventID: *id}
	}
	a.Sources.OFD = get(r.OFDReceipts, r.OFDTotal, r.OFDEventID)
	a.Sources.DWH = get(r.DWHReceipts, r.DWHTotal, r.DWHEventID)
	a.Sources.RMS = get(r.RMSReceipts, r.RMSTotal, r.RMSEventID)
	return a, nil
}

// zreportFileName is <fiscal_drive>-<shift>-v<version>.parquet, after
// checking every part is digits.
func zreportFileName(k zreport.Key, version int64) (string, error) {
	if err := k.Validate(); err != nil {
		return "", err
	}
	if version < 1 {
		return "", fmt.Errorf("%w: version %d", zreport.ErrInvalidPart, version)
	}
	return k.FiscalDrive + "-" + strconv.FormatInt(k.Shift, 10) + "-v" + strconv.FormatInt(version, 10) + ".parquet", nil
}

// zreportDateDir is the lake key prefix of a close date's partition.
func zreportDateDir(closed time.Time) string {
	return zreportsDir + "/close_date=" + closed.UTC().Format(time.DateOnly)
}

// writeZReportFile writes a's file and returns its key in the lake.
// Writing the same version again replaces the file with the same content.
func writeZReportFile(ctx context.Context, lk *lake.Lake, a *zreport.Aggregate) (string, error) {
	name, err := zreportFileName(a.Key(), a.Version)
	if err != nil {
		return "", err
	}
	row, err := zreportRowOf(a)
	if err != nil {
		return "", fmt.Errorf("zreport: lake row: %w", err)
	}
	key := zreportDateDir(a.ShiftClosedAt) + "/" + name
	_, err = lk.WriteFile(ctx, key, func(w io.Writer) error {
		pw := parquet.NewGenericWriter[ZReportRow](w, parquet.Compression(&zstd.Codec{}), parquet.DataPageVersion(1))
		if _, err := pw.Write([]ZReportRow{row}); err != nil {
			return err
		}
		return pw.Close()
	})
	if err != nil {
		return "", err
	}
	return key, nil
}

// readZReportFile reads one version file.
func readZReportFile(ctx context.Context, lk *lake.Lake, key string) (_ *zreport.Aggregate, err error) {
	defer lake.DecodePanic(key, &err) // a corrupt file fails this read, not the worker
	b, err := lk.ReadFile(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("zreport: read %s: %w", key, err)
	}
	rows, err := parquet.Read[ZReportRow](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("zreport: read %s: %w", key, err)
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("zreport: %s holds %d rows, want 1", key, len(rows))
	}
	return rows[0].aggregate()
}

// ReadLatestZReport finds k's highest version in the date partitions of
// closed ± 1 day; nil when the lake holds none. Exported for checkers of
// the zreports table (tools/outages).
//
// A key's versions start at v1, written before any other, so a key with no
// v1 in the three partitions has none: that is checked first, by name, and
// only a key found there lists the partitions. Every new entity asks, and a
// partition holds a file per key of its day: listing it for each cost time
// growing with the day's keys (45% of the bridge and worker's CPU at 2,000
// keys in BenchmarkZReportThroughput; docs/adr/0021-zreport-coalescing.md).
func ReadLatestZReport(ctx context.Context, lk *lake.Lake, k zreport.Key,
	closed time.Time) (*zreport.Aggregate, error) {
	v1, err := zreportFileName(k, 1)
	if err != nil {
		return nil, err
	}
	found := false
	for d := -1; d <= 1 && !found; d++ {
		_, err := lk.ReadFile(ctx, zreportDateDir(closed.AddDate(0, 0, d))+"/"+v1)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	if !found {
		return nil, nil
	}
	prefix := k.FiscalDrive + "-" + strconv.FormatInt(k.Shift, 10) + "-v"
	best, bestKey := int64(0), ""
	for d := -1; d <= 1; d++ {
		dir := zreportDateDir(closed.AddDate(0, 0, d))
		names, err := lk.Files(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, ".parquet") {
				continue
			}
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(n, prefix), ".parquet"), 10, 64)
			if err == nil && v > best {
				best, bestKey = v, dir+"/"+n
			}
		}
	}
	if bestKey == "" {
		return nil, nil
	}
	return readZReportFile(ctx, lk, bestKey)
}
