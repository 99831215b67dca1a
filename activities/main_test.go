package activities

import (
	"os"
	"testing"

	"reckon/internal/testing/s3test"
)

// TestMain stops the real S3 server the lake tests share after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}
