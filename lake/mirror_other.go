//go:build !linux

package lake

// exchangeDirs is not available here: Mirror renames new files in, then
// removes the old ones.
func exchangeDirs(a, b string) error { return errNoExchange }
