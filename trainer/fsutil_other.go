//go:build !linux

package trainer

import "errors"

// exchangeDirs is only atomic on Linux; elsewhere Checkpoint moves the old
// directory aside first (resume also accepts the moved-aside copy).
func exchangeDirs(a, b string) error { return errors.ErrUnsupported }
