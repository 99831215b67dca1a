package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const lakeSecret = "lake-s3-Secret-must-not-print"

func TestLakeS3Config(t *testing.T) {
	c, err := Load("", []string{
		"RECKON_LAKE_ROOT=s3://reckon-lake/prod",
		"RECKON_LAKE_S3_ENDPOINT=https://minio.internal:9000",
		"RECKON_LAKE_S3_ACCESS_KEY_ID=reckon",
		"RECKON_LAKE_S3_SECRET_ACCESS_KEY=" + lakeSecret,
		"RECKON_LAKE_S3_SESSION_TOKEN=" + lakeSecret + "-token",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Lake.IsS3() || c.Lake.S3.Endpoint != "https://minio.internal:9000" || c.Lake.S3.SecretAccessKey.Reveal() != lakeSecret {
		t.Fatalf("lake = %+v", c.Lake)
	}
	show, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for where, s := range map[string]string{"config show": string(show), "%+v": fmt.Sprintf("%+v", c.Lake), "%#v": fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, lakeSecret) {
			t.Errorf("%s prints the lake secret:\n%s", where, s)
		}
	}
	if !strings.Contains(string(show), "secret_access_key: '[redacted]'") && !strings.Contains(string(show), `secret_access_key: "[redacted]"`) {
		t.Errorf("config show does not show the secret as redacted:\n%s", show)
	}
	for _, k := range []string{"lake.s3.endpoint", "lake.s3.region", "lake.s3.access_key_id", "lake.s3.secret_access_key",
		"lake.s3.secret_access_key_file", "lake.s3.session_token", "lake.s3.ca_file", "lake.s3.allow_plaintext_credentials"} {
		if !slices.Contains(Keys(), k) {
			t.Errorf("key %s (%s) is not overridable", k, EnvName(k))
		}
	}
}

func TestLakeS3Validation(t *testing.T) {
	s3 := func(env ...string) []string { return append([]string{"RECKON_LAKE_ROOT=s3://reckon-lake/x"}, env...) }
	for _, ok := range [][]string{
		{"RECKON_LAKE_ROOT=/var/lib/reckon/lake"},
		s3("RECKON_LAKE_S3_REGION=eu-central-1"), // AWS, role credentials
		s3("RECKON_LAKE_S3_ENDPOINT=https://minio:9000", "RECKON_LAKE_S3_ACCESS_KEY_ID=a", "RECKON_LAKE_S3_SECRET_ACCESS_KEY_FILE=/run/secrets/s3"),
		s3("RECKON_LAKE_S3_ENDPOINT=http://127.0.0.1:9000"), // anonymous dev MinIO
		s3("RECKON_LAKE_S3_ENDPOINT=http://minio:9000", "RECKON_LAKE_S3_ACCESS_KEY_ID=a", "RECKON_LAKE_S3_SECRET_ACCESS_KEY=s", "RECKON_LAKE_S3_ALLOW_PLAINTEXT_CREDENTIALS=true"),
	} {
		if _, err := Load("", ok, nil); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"RECKON_LAKE_ROOT=./lake", "RECKON_LAKE_S3_REGION=x"}, "lake.s3: set, but lake.root"},
		{s3(), "endpoint or region is required"},
		{[]string{"RECKON_LAKE_ROOT=s3://Bad_Bucket", "RECKON_LAKE_S3_REGION=x"}, "outside [a-z0-9.-]"},
		{[]string{"RECKON_LAKE_ROOT=s3://", "RECKON_LAKE_S3_REGION=x"}, "3 to 63"},
		{[]string{"RECKON_LAKE_ROOT=s3://reckon-lake/a/../b", "RECKON_LAKE_S3_REGION=x"}, "clean path"},
		{s3("RECKON_LAKE_S3_ENDPOINT=minio:9000"), "not an http(s)"},
		{s3("RECKON_LAKE_S3_ENDPOINT=https://minio:9000/bucket"), "not an http(s)"},
		{s3("RECKON_LAKE_S3_REGION=x", "RECKON_LAKE_S3_ACCESS_KEY_ID=a"), "go together"},
		{s3("RECKON_LAKE_S3_REGION=x", "RECKON_LAKE_S3_SECRET_ACCESS_KEY="+lakeSecret), "go together"},
		{s3("RECKON_LAKE_S3_REGION=x", "RECKON_LAKE_S3_ACCESS_KEY_ID=a", "RECKON_LAKE_S3_SECRET_ACCESS_KEY="+lakeSecret, "RECKON_LAKE_S3_SECRET_ACCESS_KEY_FILE=f"), "both set"},
		{s3("RECKON_LAKE_S3_REGION=x", "RECKON_LAKE_S3_ACCESS_KEY_ID=a", "RECKON_LAKE_S3_SECRET_ACCESS_KEY=[redacted]"), "placeholder"},
		{s3("RECKON_LAKE_S3_REGION=x", "RECKON_LAKE_S3_SESSION_TOKEN="+lakeSecret), "session_token: needs"},
		{s3("RECKON_LAKE_S3_ENDPOINT=http://minio:9000", "RECKON_LAKE_S3_CA_FILE=ca.pem"), "ca_file: set, but"},
	} {
		_, err := Load("", tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), lakeSecret) {
			t.Errorf("%v: error prints the secret: %v", tc.env, err)
		}
	}
}

func TestLakeS3PlaintextCredentialsRefused(t *testing.T) {
	env := []string{"RECKON_LAKE_ROOT=s3://reckon-lake", "RECKON_LAKE_S3_ENDPOINT=http://minio:9000",
		"RECKON_LAKE_S3_ACCESS_KEY_ID=a", "RECKON_LAKE_S3_SECRET_ACCESS_KEY=" + lakeSecret}
	_, err := Load("", env, nil)
	if !errors.Is(err, ErrSecurity) || !strings.Contains(err.Error(), "allow_plaintext_credentials") {
		t.Fatalf("credentials over http: err = %v, want ErrSecurity", err)
	}
	if strings.Contains(err.Error(), lakeSecret) {
		t.Errorf("error prints the secret: %v", err)
	}
	env[1] = "RECKON_LAKE_S3_ENDPOINT=https://minio:9000"
	if _, err := Load("", env, nil); err != nil {
		t.Errorf("credentials over https refused: %v", err)
	}
}

func TestLakeS3SecretFileAndCA(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s3-secret")
	if err := os.WriteFile(f, []byte(lakeSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LakeS3{SecretAccessKeyFile: f}.ResolveSecretAccessKey()
	if err != nil || got.Reveal() != lakeSecret {
		t.Fatalf("secret file: %v", err)
	}
	if _, err := (LakeS3{SecretAccessKeyFile: filepath.Join(dir, "nope")}).ResolveSecretAccessKey(); err == nil || !strings.Contains(err.Error(), "lake.s3.secret_access_key_file") {
		t.Errorf("missing secret file: %v", err)
	}
	if tc, err := (LakeS3{}).ClientTLS(); tc != nil || err != nil {
		t.Errorf("no ca_file: %v, %v", tc, err)
	}
	if _, err := (LakeS3{CAFile: f}).ClientTLS(); err == nil || !strings.Contains(err.Error(), "lake.s3.ca_file "+f) {
		t.Errorf("a file without PEM certificates as ca_file: %v", err)
	}
}
