package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"

	"github.com/minio/minio-go/v7"
)

// Reads of an S3 object: the footer comes with the open (the file's last
// TailSize bytes in one GET), column chunks through prefetch (one GET per
// run of wanted chunks), and anything else through ReadAt, which fetches at
// least readAhead bytes and keeps the last maxSegments fetches.
const (
	TailSize    = 128 << 10
	readAhead   = 512 << 10
	maxSegments = 16
	// coalesceGap: wanted chunks closer than this are fetched in one GET
	// (the gap costs less to transfer than another round trip).
	coalesceGap = 256 << 10
	// maxFetches bounds the GETs one prefetch runs at once.
	maxFetches = 4
)

func (s *S3) Open(ctx context.Context, key string, size int64) (ObjectReader, error) {
	o := &s3Object{s: s, ctx: ctx, key: key, size: size}
	if size < 0 {
		st, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
		if isNotFound(err) {
			return nil, fmt.Errorf("lake: %s: %w", s.where(key), fs.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("lake: open %s: %w", s.where(key), err)
		}
		o.size, o.etag = st.Size, st.ETag
	}
	if o.size > 0 {
		off := max(0, o.size-TailSize)
		data, err := o.fetch(off, o.size)
		if err != nil {
			return nil, err
		}
		o.segs = append(o.segs, segment{off, data})
	}
	return o, nil
}

// s3Object reads one object with ranged GETs. Every GET after the first
// carries If-Match with the first one's ETag, so an object replaced while
// it is read fails the read instead of mixing two versions.
type s3Object struct {
	s    *S3
	ctx  context.Context
	key  string
	size int64

	mu   sync.Mutex // protects the following fields
	etag string
	segs []segment // fetched spans, least recently used first
}

type segment struct {
	off  int64
	data []byte
}

func (o *s3Object) Size() int64 { return o.size }

func (o *s3Object) Close() error {
	o.mu.Lock()
	o.segs = nil
	o.mu.Unlock()
	return nil
}

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("lake: read %s: negative offset", o.s.where(o.key))
	}
	if off >= o.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), o.size)
	o.mu.Lock()
	defer o.mu.Unlock()
	seg, ok := o.cached(off, end)
	if !ok {
		data, err := o.fetch(off, min(o.size, off+max(end-off, readAhead)))
		if err != nil {
			return 0, err
		}
		seg = segment{off, data}
		o.segs = append(o.segs, seg)
		if len(o.segs) > maxSegments {
			o.segs = slices.Delete(o.segs, 0, len(o.segs)-maxSegments)
		}
	}
	n := copy(p, seg.data[off-seg.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// cached returns a fetched segment holding [off, end), marking it used.
func (o *s3Object) cached(off, end int64) (segment, bool) {
	for i := len(o.segs) - 1; i >= 0; i-- {
		sg := o.segs[i]
		if sg.off <= off && end <= sg.off+int64(len(sg.data)) {
			o.segs = append(slices.Delete(o.segs, i, i+1), sg)
			return sg, true
		}
	}
	return segment{}, false
}

// prefetch fetches ranges (coalescing close ones, a few GETs at a time)
// and makes them the cache, replacing what earlier reads left there.
func (o *s3Object) Prefetch(ranges []ByteRange) error {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b ByteRange) int { return cmp.Compare(a.Off, b.Off) })
	var spans []ByteRange
	for _, r := range rs {
		if r.N <= 0 || r.Off < 0 || r.Off >= o.size {
			continue // a corrupt footer's offsets: the decode reports it
		}
		if n := len(spans); n > 0 && r.Off <= spans[n-1].Off+spans[n-1].N+coalesceGap {
			spans[n-1].N = max(spans[n-1].N, r.Off+r.N-spans[n-1].Off)
			continue
		}
		spans = append(spans, r)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	segs := make([]segment, len(spans))
	errs := make([]error, len(spans))
	sem := make(chan struct{}, maxFetches)
	var wg sync.WaitGroup
	for i, sp := range spans {
		if sg, ok := o.cached(sp.Off, sp.Off+sp.N); ok {
			segs[i] = sg
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			data, err := o.fetch(sp.Off, min(o.size, sp.Off+sp.N))
			segs[i], errs[i] = segment{sp.Off, data}, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.segs = segs
	return nil
}

// fetch GETs [off, end) of the object. The caller holds mu, except in
// open, before the object is shared, and in prefetch's fetches, which only
// read etag once it is set.
func (o *s3Object) fetch(off, end int64) ([]byte, error) {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, end-1); err != nil {
		return nil, fmt.Errorf("lake: read %s: %w", o.s.where(o.key), err)
	}
	if o.etag != "" {
		opts.SetMatchETag(o.etag)
	}
	rc, info, _, err := o.s.core.GetObject(o.ctx, o.s.bucket, o.s.object(o.key), opts)
	if isNotFound(err) {
		return nil, fmt.Errorf("lake: %s: %w", o.s.where(o.key), fs.ErrNotExist)
	}
	if minio.ToErrorResponse(err).Code == "PreconditionFailed" {
		return nil, fmt.Errorf("%w: %s was replaced while being read", ErrBadFile, o.s.where(o.key))
	}
	if err != nil {
		return nil, fmt.Errorf("lake: read %s: %w", o.s.where(o.key), err)
	}
	defer rc.Close()
	if o.etag == "" {
		o.etag = info.ETag
	}
	data := make([]byte, end-off)
	if _, err := io.ReadFull(rc, data); err != nil {
		return nil, fmt.Errorf("lake: read %s bytes %d-%d: %w", o.s.where(o.key), off, end-1, err)
	}
	return data, nil
}
