package workers

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnreadableConnectionFiles: a Kafka TLS or password file the process
// cannot read stops `reckon stream` and `reckon batch` at startup with an
// error naming the config key and the file, before any connection is
// attempted (the brokers and the Temporal frontend here do not exist).
func TestUnreadableConnectionFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name string
		sets []string
		key  string
	}{
		{"ca_file", []string{"kafka.tls.enabled=true", "kafka.tls.ca_file=" + missing}, "kafka.tls.ca_file"},
		{"password_file", []string{"kafka.tls.enabled=true", "kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=reckon",
			"kafka.sasl.password_file=" + missing}, "kafka.sasl.password_file"},
	} {
		for _, cmd := range []string{"stream", "batch"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				args := []string{cmd, "--set", "kafka.brokers=127.0.0.1:1", "--set", "temporal.address=127.0.0.1:1", "--set", "metrics.addr=127.0.0.1:0"}
				for _, s := range tc.sets {
					args = append(args, "--set", s)
				}
				// Startup fails at once; without the check the commands
				// would retry their connections until this deadline. The
				// cancel also stops the metrics endpoint `reckon stream` starts.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var out, errb bytes.Buffer
				code := Main(ctx, args, strings.NewReader(""), &out, &errb, nil)
				if code == 0 || !strings.Contains(errb.String(), tc.key) || !strings.Contains(errb.String(), missing) {
					t.Fatalf("exit %d, stderr %q; want a failure naming %s and %s", code, errb.String(), tc.key, missing)
				}
			})
		}
	}
}
