package lake

import (
	"errors"
	"fmt"

	"reckon/lake/storage"
)

// DecodePanic turns a panic of the Parquet decoder into an error: some
// corrupt files (a flipped byte in the footer's metadata) make
// parquet-go panic instead of failing. Deferred around a decode of key as
//
//	defer lake.DecodePanic(key, &err)
//
// it recovers the panic and sets *err to an ErrBadFile naming key, so a
// corrupt lake file fails the read that met it, never the process.
func DecodePanic(key string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: %w", ErrBadFile, key, decoderPanic(r))
	}
}

// decoderPanic is the error of a recovered decoder panic.
func decoderPanic(r any) error {
	return fmt.Errorf("the Parquet decoder failed on it: %v", r)
}

// decode decodes row group rgi of c's file into b; a decoder panic is
// returned as an error, which the caller reports as ErrBadFile.
func (c *fileCursor) decode(s *scanner, b *rgData, rgi int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = decoderPanic(r)
		}
	}()
	return b.decode(s, c.pf.RowGroups()[rgi], c.cols)
}

// openFile is parquet.OpenFile of key with a decoder panic as an
// ErrBadFile error.
func openFile(key string, open func() error) (err error) {
	defer DecodePanic(key, &err)
	return open()
}

// badFile is the error of a file that failed to decode with err: an
// ErrBadFile naming key, unless err is the storage's (a ReadError), which
// is returned as it is.
func badFile(key string, err error) error {
	var re *storage.ReadError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrBadFile, key, err)
}
