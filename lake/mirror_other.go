//go:build !linux

package lake

import "context"

// exchangeDirs is not available here: Mirror renames new files in, then
// removes the old ones.
func exchangeDirs(a, b string) error { return errNoExchange }

// lockMirror takes no lock here: passes on one root must not overlap.
func lockMirror(context.Context, string) (func(), error) { return func() {}, nil }
