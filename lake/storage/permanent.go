package storage

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/minio/minio-go/v7"
)

// IsPermanent reports whether err is a storage failure no retry can fix:
// access denied (a directory's permissions, S3 AccessDenied or bad
// credentials), a read-only file system, or the bucket gone. A full disk
// is not permanent: space can come back.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return true
	}
	return s3Permanent(err)
}

// s3Permanent reports whether err is an S3 answer no retry can fix: the
// bucket does not exist, access is denied or the credentials are refused.
func s3Permanent(err error) bool {
	var r minio.ErrorResponse
	if !errors.As(err, &r) {
		return false
	}
	switch r.Code {
	case "NoSuchBucket", "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId",
		"SignatureDoesNotMatch", "AccountProblem", "InvalidBucketName":
		return true
	}
	return false
}
