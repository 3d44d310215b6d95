//go:build !unix

package trainer

import "os"

// tryLock: run-directory locks need flock(2); elsewhere runs are not
// protected against a second process in the same directory.
func tryLock(f *os.File) (bool, error) { return true, nil }
