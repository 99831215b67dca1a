package storage

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Scheme prefixes an Options.Root on S3-compatible object storage:
// s3://bucket or s3://bucket/prefix.
const S3Scheme = "s3://"

// S3Options says how to reach the object store of an s3:// root
// (docs/adr/0011-lake-object-storage.md). Its String method hides the
// credentials, so printing Options never shows them.
type S3Options struct {
	// Endpoint is the S3 API's base URL: https://host[:port] or
	// http://host[:port] (MinIO, Ceph, a test fake). The scheme decides
	// TLS. Default https://s3.<Region>.amazonaws.com.
	Endpoint string
	// Region is the bucket's region. Required without Endpoint; with one,
	// empty means the store is asked (one request, cached).
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken sign requests. Empty
	// AccessKeyID: the AWS_*/MINIO_* environment variables, then the
	// instance or pod role (IAM).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// TLS configures https endpoints (e.g. a private CA in RootCAs); nil
	// means the system roots, TLS 1.2 or later.
	TLS *tls.Config
	// PartSize: a file larger than this is uploaded in parts of this size
	// (multipart upload), so memory per write stays bounded. Default 16
	// MiB; at least 5 MiB (S3's minimum part size).
	PartSize int64
	// Transport replaces the HTTP transport (tests). Default: minio-go's,
	// with TLS.
	Transport http.RoundTripper
}

// String describes o without its secrets.
func (o S3Options) String() string {
	redact := func(s string) string {
		if s == "" {
			return ""
		}
		return "[redacted]"
	}
	return fmt.Sprintf("{Endpoint:%s Region:%s AccessKeyID:%s SecretAccessKey:%s SessionToken:%s PartSize:%d}",
		o.Endpoint, o.Region, o.AccessKeyID, redact(o.SecretAccessKey), redact(o.SessionToken), o.PartSize)
}

// GoString is String, for %#v.
func (o S3Options) GoString() string { return "storage.S3Options" + o.String() }

const (
	MinPartSize     = 5 << 20
	maxPartSize     = 5 << 30
	defaultPartSize = 16 << 20
)

// IsS3Root reports whether root names an S3 location (s3://...).
func IsS3Root(root string) bool { return strings.HasPrefix(root, S3Scheme) }

// parseS3Root splits s3://bucket/prefix into bucket and prefix (without
// leading or trailing slashes).
func ParseS3Root(root string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(root, S3Scheme)
	if !ok {
		return "", "", fmt.Errorf("lake: options: Root %q is not an %s URL", root, S3Scheme)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if err := validBucket(bucket); err != nil {
		return "", "", fmt.Errorf("lake: options: Root %q: %w", root, err)
	}
	if strings.ContainsAny(prefix, "?#\\") || prefix != "" && !ValidKey(prefix) {
		return "", "", fmt.Errorf(
			"lake: options: Root %q: prefix %q must be a clean path without . or .. elements, ? # or \\", root, prefix)
	}
	return bucket, prefix, nil
}

// validBucket checks S3's bucket naming rules: 3-63 characters of a-z, 0-9,
// '.' and '-', starting and ending with a letter or digit.
func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket %q must be 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("bucket %q: character %q outside [a-z0-9.-]", b, c)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return fmt.Errorf("bucket %q must start and end with a letter or digit", b)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// endpointURL returns the endpoint o talks to.
func (o S3Options) endpointURL() (*url.URL, error) {
	ep := o.Endpoint
	if ep == "" {
		ep = "https://s3." + o.Region + ".amazonaws.com"
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("lake: options: S3.Endpoint %q is not an http(s)://host[:port] URL", o.Endpoint)
	}
	return u, nil
}

// Validate reports every problem with o at once.
func (o S3Options) Validate() error {
	var errs []error
	if o.Endpoint == "" && o.Region == "" {
		errs = append(errs, errors.New("lake: options: S3.Endpoint or S3.Region is required for an s3:// Root"))
	} else if _, err := o.endpointURL(); err != nil {
		errs = append(errs, err)
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		errs = append(errs, errors.New("lake: options: S3.AccessKeyID and S3.SecretAccessKey go together"))
	}
	if o.SessionToken != "" && o.AccessKeyID == "" {
		errs = append(errs, errors.New("lake: options: S3.SessionToken needs S3.AccessKeyID and S3.SecretAccessKey"))
	}
	if o.PartSize != 0 && (o.PartSize < MinPartSize || o.PartSize > maxPartSize) {
		errs = append(errs, fmt.Errorf("lake: options: S3.PartSize %d outside 5 MiB..5 GiB", o.PartSize))
	}
	return errors.Join(errs...)
}

// s3Store keeps the lake under a prefix of a bucket. S3 has no rename: a
// file becomes visible when its single PUT (or the completion of its
// multipart upload) succeeds, which is the atomic commit writeAtomic's
// rename is on disk.
type S3 struct {
	client   *minio.Client
	core     minio.Core
	bucket   string
	prefix   string // without slashes; "" for the bucket's root
	partSize int64
}

func NewS3(root string, o S3Options) (*S3, error) {
	bucket, prefix, err := ParseS3Root(root)
	if err != nil {
		return nil, err
	}
	u, err := o.endpointURL()
	if err != nil {
		return nil, err
	}
	secure := u.Scheme == "https"
	tr := o.Transport
	if tr == nil {
		t, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fmt.Errorf("lake: s3 transport: %w", err)
		}
		if secure && o.TLS != nil {
			t.TLSClientConfig = o.TLS.Clone()
			if t.TLSClientConfig.MinVersion < tls.VersionTLS12 {
				t.TLSClientConfig.MinVersion = tls.VersionTLS12
			}
		}
		tr = t
	}
	creds := credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)
	if o.AccessKeyID == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.IAM{},
		})
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: secure, Transport: tr, Region: o.Region, BucketLookup: minio.BucketLookupAuto,
	})
	if err != nil {
		return nil, fmt.Errorf("lake: s3 client: %w", err)
	}
	ps := o.PartSize
	if ps == 0 {
		ps = defaultPartSize
	}
	return &S3{client: c, core: minio.Core{Client: c}, bucket: bucket, prefix: prefix, partSize: ps}, nil
}

// object is the object name of key.
func (s *S3) object(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

// dirPrefix is the listing prefix of directory dir ("" is the root).
func (s *S3) dirPrefix(dir string) string {
	if dir == "" {
		if s.prefix == "" {
			return ""
		}
		return s.prefix + "/"
	}
	return s.object(dir) + "/"
}

// where names key in messages.
// Core returns the S3 client and the bucket, for tools and tests that
// look at the bucket itself (unfinished uploads, raw objects).
func (s *S3) Core() (minio.Core, string) { return s.core, s.bucket }

// Object returns the object name of key: the prefix joined with key.
func (s *S3) Object(key string) string { return s.object(key) }

// DirPrefix returns the object name prefix of the directory dir.
func (s *S3) DirPrefix(dir string) string { return s.dirPrefix(dir) }

func (s *S3) where(key string) string { return S3Scheme + s.bucket + "/" + s.object(key) }

func (s *S3) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	u := &s3Upload{s: s, ctx: ctx, object: s.object(key)}
	err := write(u)
	if err == nil {
		err = u.finish()
	}
	if err != nil {
		u.abort()
		return 0, fmt.Errorf("lake: write %s: %w", s.where(key), err)
	}
	return u.size, nil
}

// s3Upload buffers a file being written. Up to one part it is sent with a
// single PUT when the write finishes; a larger file becomes a multipart
// upload whose parts are sent as they fill, and which is visible only once
// completed. Either way nothing is visible under the name before the
// write succeeded.
type s3Upload struct {
	s        *S3
	ctx      context.Context
	object   string
	buf      []byte
	size     int64
	uploadID string // "" until the first part
	parts    []minio.CompletePart
	err      error
}

func (u *s3Upload) Write(p []byte) (int, error) {
	if u.err == nil {
		u.err = u.ctx.Err() // a cancelled write stops here, not at its next request
	}
	if u.err != nil {
		return 0, u.err
	}
	n := len(p)
	for len(p) > 0 {
		room := int(u.s.partSize) - len(u.buf)
		take := min(room, len(p))
		u.buf = append(u.buf, p[:take]...)
		p = p[take:]
		if len(u.buf) == int(u.s.partSize) {
			if u.err = u.sendPart(); u.err != nil {
				return n - len(p), u.err
			}
		}
	}
	u.size += int64(n)
	return n, nil
}

// sendPart uploads the buffer as the next part, starting the multipart
// upload first if needed.
func (u *s3Upload) sendPart() error {
	if u.uploadID == "" {
		id, err := u.s.core.NewMultipartUpload(u.ctx, u.s.bucket, u.object,
			minio.PutObjectOptions{ContentType: contentType(u.object)})
		if err != nil {
			return err
		}
		u.uploadID = id
	}
	num := len(u.parts) + 1
	part, err := u.s.core.PutObjectPart(u.ctx, u.s.bucket, u.object, u.uploadID, num,
		bytes.NewReader(u.buf), int64(len(u.buf)),
		minio.PutObjectPartOptions{Md5Base64: md5Base64(u.buf), DisableContentSha256: true})
	if err != nil {
		return err
	}
	u.parts = append(u.parts, minio.CompletePart{PartNumber: num, ETag: part.ETag})
	u.buf = u.buf[:0]
	return nil
}

// finish makes the object visible: one PUT, or the last part and the
// completion of the multipart upload.
func (u *s3Upload) finish() error {
	if u.err != nil {
		return u.err
	}
	if u.uploadID == "" {
		_, err := u.s.core.PutObject(u.ctx, u.s.bucket, u.object, bytes.NewReader(u.buf), int64(len(u.buf)),
			md5Base64(u.buf), "", minio.PutObjectOptions{ContentType: contentType(u.object), DisableContentSha256: true})
		return err
	}
	if len(u.buf) > 0 {
		if err := u.sendPart(); err != nil {
			return err
		}
	}
	_, err := u.s.core.CompleteMultipartUpload(u.ctx, u.s.bucket, u.object, u.uploadID, u.parts, minio.PutObjectOptions{})
	if err == nil {
		u.uploadID = ""
	}
	return err
}

// abort discards a started multipart upload. It runs even when ctx was
// cancelled; an upload it cannot abort is removed by Compact's stale
// debris sweep or the bucket's lifecycle rule.
func (u *s3Upload) abort() {
	if u.uploadID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(u.ctx), 30*time.Second)
	defer cancel()
	u.s.core.AbortMultipartUpload(ctx, u.s.bucket, u.object, u.uploadID)
	u.uploadID = ""
}

func md5Base64(b []byte) string {
	sum := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".json":
		return "application/json"
	}
	return "application/octet-stream"
}

// isNotFound reports whether err says the object (or upload) is missing.
func isNotFound(err error) bool {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NoSuchUpload", "NotFound":
		return true
	}
	return false
}

func (s *S3) ReadFile(ctx context.Context, key string) ([]byte, error) {
	rc, _, _, err := s.core.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
	if isNotFound(err) {
		return nil, fmt.Errorf("lake: %s: %w", s.where(key), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: read %s: %w", s.where(key), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("lake: read %s: %w", s.where(key), err)
	}
	return b, nil
}

func (s *S3) List(ctx context.Context, dir string) ([]Entry, error) {
	prefix := s.dirPrefix(dir)
	var out []Entry
	for o := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if o.Err != nil {
			return nil, fmt.Errorf("lake: list %s: %w", s.where(dir), o.Err)
		}
		name := strings.TrimPrefix(o.Key, prefix)
		if d, ok := strings.CutSuffix(name, "/"); ok {
			if d != "" {
				out = append(out, Entry{Name: d, Dir: true})
			}
			continue
		}
		if name != "" {
			out = append(out, Entry{Name: name, Size: o.Size, ModTime: o.LastModified, ETag: o.ETag})
		}
	}
	if err := ctx.Err(); err != nil {
		// minio-go ends a listing whose ctx is done without an error.
		return nil, fmt.Errorf("lake: list %s: %w", s.where(dir), err)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *S3) Walk(ctx context.Context, dir string, fn func(key string, e Entry) error) error {
	root := s.dirPrefix("")
	opts := minio.ListObjectsOptions{Prefix: s.dirPrefix(dir), Recursive: true}
	for o := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if o.Err != nil {
			return fmt.Errorf("lake: walk %s: %w", s.where(dir), o.Err)
		}
		key := strings.TrimPrefix(o.Key, root)
		if key == "" || strings.HasSuffix(key, "/") {
			continue
		}
		if err := fn(key, Entry{Name: path.Base(key), Size: o.Size, ModTime: o.LastModified, ETag: o.ETag}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		// minio-go ends a listing whose ctx is done without an error.
		return fmt.Errorf("lake: walk %s: %w", s.where(dir), err)
	}
	return nil
}

func (s *S3) Remove(ctx context.Context, dir string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	objs := func(yield func(minio.ObjectInfo) bool) {
		for _, n := range names {
			if !yield(minio.ObjectInfo{Key: s.object(JoinKey(dir, n))}) {
				return
			}
		}
	}
	results, err := s.client.RemoveObjectsWithIter(ctx, s.bucket, objs, minio.RemoveObjectsOptions{})
	if err != nil {
		return fmt.Errorf("lake: remove in %s: %w", s.where(dir), err)
	}
	var errs []error
	for r := range results {
		if r.Err != nil && !isNotFound(r.Err) {
			errs = append(errs, fmt.Errorf("lake: remove %s: %w", r.ObjectName, r.Err))
		}
	}
	if err := ctx.Err(); err != nil {
		// minio-go stops sending deletes once ctx is done without saying
		// which were sent: report the removal as failed (it is idempotent).
		errs = append(errs, fmt.Errorf("lake: remove in %s: %w", s.where(dir), err))
	}
	return errors.Join(errs...)
}

// lock creates the lock object with a conditional PUT (If-None-Match: *),
// which S3, MinIO and most compatible stores refuse when it exists. A store
// that ignores the condition makes the lock advisory only; compaction stays
// correct without it (ADR 0011).
func (s *S3) Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	return s.LockAs(ctx, dir, NewLockToken(), now, maxAge)
}

func (s *S3) LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	obj := s.object(JoinKey(dir, LockName))
	unlock := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		s.client.RemoveObject(ctx, s.bucket, obj, minio.RemoveObjectOptions{})
	}
	for attempt := 0; ; attempt++ {
		opts := minio.PutObjectOptions{ContentType: "text/plain", DisableContentSha256: true}
		opts.SetMatchETagExcept("*")
		body := lockBody(token, now)
		_, err := s.core.PutObject(ctx, s.bucket, obj, bytes.NewReader(body), int64(len(body)), md5Base64(body), "", opts)
		if err == nil {
			return unlock, nil
		}
		switch minio.ToErrorResponse(err).Code {
		case "PreconditionFailed", "ConditionalRequestConflict":
		default:
			return nil, fmt.Errorf("lake: compact %s: lock: %w", s.where(dir), err)
		}
		if b, err := s.ReadFile(ctx, JoinKey(dir, LockName)); err == nil && ownsLock(b, token) {
			return unlock, nil // taken by an earlier call whose answer was lost
		}
		st, serr := s.client.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
		if attempt > 0 || serr == nil && now.Sub(st.LastModified) < maxAge {
			return nil, fmt.Errorf("lake: compact %s: %w", s.where(dir), ErrLockHeld)
		}
		if serr == nil {
			s.client.RemoveObject(ctx, s.bucket, obj, minio.RemoveObjectOptions{})
		}
	}
}

// removeStale aborts multipart uploads in dir started more than maxAge ago:
// the S3 counterpart of a crashed write's temporary file.
func (s *S3) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	prefix := s.dirPrefix(dir)
	root := s.dirPrefix("")
	var gone []string
	keyMarker, idMarker := "", ""
	for {
		res, err := s.core.ListMultipartUploads(ctx, s.bucket, prefix, keyMarker, idMarker, "/", 1000)
		if isNotFound(err) { // gofakes3 answers NoSuchUpload for a bucket that never had one
			return gone, nil
		}
		if err != nil {
			return gone, fmt.Errorf("lake: compact %s: list uploads: %w", s.where(dir), err)
		}
		for _, up := range res.Uploads {
			if now.Sub(up.Initiated) < maxAge {
				continue
			}
			if err := s.core.AbortMultipartUpload(ctx, s.bucket, up.Key, up.UploadID); err != nil && !isNotFound(err) {
				return gone, fmt.Errorf("lake: compact %s: abort upload: %w", s.where(dir), err)
			}
			gone = append(gone, strings.TrimPrefix(up.Key, root)+" (upload "+up.UploadID+")")
		}
		if !res.IsTruncated {
			return gone, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

func (s *S3) Remote() bool { return true }
