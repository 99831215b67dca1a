// Package corrupt damages a file's bytes the way fuzz tests of the lake's
// readers need: one byte flipped and the tail cut off, the result written
// where a fresh lake will find it. It is for tests only.
package corrupt

import (
	"os"
	"path/filepath"
	"testing"
)

// Bytes returns a copy of data with the byte at pos (modulo len(data))
// XORed with flip (0: none), then cut bytes (modulo len(data)) removed from
// the end. data must not be empty.
func Bytes(data []byte, pos uint32, flip byte, cut uint32) []byte {
	out := append([]byte(nil), data...)
	n := uint32(len(out))
	if flip != 0 {
		out[pos%n] ^= flip
	}
	if cut > 0 {
		out = out[:n-cut%n]
	}
	return out
}

// Root writes data as the file key (slash-separated, relative to the root)
// under a new temporary directory of t and returns that directory: the
// root of a lake holding only that file.
func Root(t testing.TB, key string, data []byte) string {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// Read returns the bytes of the file key (slash-separated, relative to
// root) of a lake rooted at root, failing t if it cannot: the file to
// corrupt, as the lake wrote it.
func Read(t testing.TB, root, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
