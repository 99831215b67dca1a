package workers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"reckon/internal/event"
)

// validateSlack is how far past gate.max_payload_bytes a line is still read
// whole, so the gate itself reports it; longer lines are skipped unread and
// reported here, so memory stays bounded whatever the input.
const validateSlack = 64 << 10

// verdict is one output line of `reckon validate`.
type verdict struct {
	Line    int      `json:"line"`
	Valid   bool     `json:"valid"`
	Fields  []string `json:"fields"`
	Reasons []string `json:"reasons"`
}

// runValidate checks JSONL envelopes from stdin against the quality gate
// and prints one verdict per non-empty line. It exits 1 when any line is
// invalid (after every verdict, with a count on stderr), so a script or a
// CI step can gate on it; --allow-invalid exits 0 whatever the verdicts,
// as before. I/O errors fail it either way.
func runValidate(ctx context.Context, cx *cmdContext) error {
	nowFlag := cx.fs.String("now", "",
		"arrival time for the future-skew and past-age checks, RFC 3339 (default: the current time)")
	allowInvalid := cx.fs.Bool("allow-invalid", false, "exit 0 even when lines are invalid (default: exit 1 if any is)")
	if err := cx.parse(); err != nil {
		return err
	}
	if cx.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (envelopes are read from stdin)", errUsage, cx.fs.Args())
	}
	now := time.Now
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339Nano, *nowFlag)
		if err != nil {
			return fmt.Errorf("%w: --now: %v", errUsage, err)
		}
		now = func() time.Time { return t }
	}
	g, err := event.NewGate(cx.cfg.Gate)
	if err != nil {
		return err
	}
	maxBytes := cx.cfg.Gate.MaxPayloadBytes
	if maxBytes <= 0 {
		maxBytes = event.DefaultMaxPayloadBytes
	}
	invalid, lines, err := validateLines(ctx, g, cx.stdin, cx.stdout, maxBytes, now)
	if err != nil || invalid == 0 || *allowInvalid {
		return err
	}
	return fmt.Errorf("%d of %d lines invalid (--allow-invalid exits 0)", invalid, lines)
}

// validateLines is the loop of runValidate: it returns how many lines were
// judged and how many of them were invalid.
func validateLines(ctx context.Context, g *event.Gate, in io.Reader, out io.Writer, maxBytes int,
	now func() time.Time) (invalid, lines int, err error) {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriter(out)
	limit := maxBytes + validateSlack
	var line []byte
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return invalid, lines, err
		}
		var size int
		var err error
		line, size, err = readLine(r, line[:0], limit)
		if err != nil && !errors.Is(err, io.EOF) {
			return invalid, lines, fmt.Errorf("validate: reading stdin: %w", err)
		}
		eof := err != nil
		if size == len(line) && size > 0 && line[size-1] == '\r' {
			line, size = line[:size-1], size-1
		}
		if size > 0 {
			v := validateLine(g, n, line, size, maxBytes, now)
			lines++
			if !v.Valid {
				invalid++
			}
			if err := writeVerdict(w, v); err != nil {
				return invalid, lines, err
			}
		}
		if eof {
			break
		}
	}
	if err := w.Flush(); err != nil {
		return invalid, lines, fmt.Errorf("validate: %w", err)
	}
	return invalid, lines, nil
}

// validateLine judges line n; size > len(line) means it was too long to keep.
func validateLine(g *event.Gate, n int, line []byte, size, maxBytes int, now func() time.Time) verdict {
	v := verdict{Line: n, Fields: []string{}, Reasons: []string{}}
	if size > len(line) {
		v.Fields = []string{"payload"}
		v.Reasons = []string{fmt.Sprintf("payload: %d bytes exceeds max_payload_bytes %d", size, maxBytes)}
		return v
	}
	if _, res := g.Check(line, now()); res.Valid {
		v.Valid = true
	} else {
		v.Fields, v.Reasons = res.Fields, res.Reasons
	}
	return v
}

func writeVerdict(w io.Writer, v verdict) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	return nil
}

// readLine reads one line (without its newline) into buf, keeping at most
// limit bytes, and returns it with the line's full size. When size >
// len(line) the line was too long and only counted. err is nil, io.EOF when
// the input ended with this line, or the read error.
func readLine(r *bufio.Reader, buf []byte, limit int) (line []byte, size int, err error) {
	over := false
	for {
		chunk, err := r.ReadSlice('\n')
		if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
			chunk = chunk[:n-1]
		}
		size += len(chunk)
		if !over && len(buf)+len(chunk) <= limit {
			buf = append(buf, chunk...)
		} else {
			over, buf = true, buf[:0]
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, size, err
		}
	}
}
