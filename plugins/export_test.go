package plugins

import "testing"

// SetHostMaxVersion makes the host offer protocol versions up to v for the
// rest of the test, as a host built before version v+1 would.
func SetHostMaxVersion(t *testing.T, v int) {
	old := hostMaxVersion
	hostMaxVersion = v
	t.Cleanup(func() { hostMaxVersion = old })
}
