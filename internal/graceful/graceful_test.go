package graceful

import (
	"context"
	"testing"
)

// Begin calls the function WithBegin put in the context, and does nothing
// on a context without one.
func TestBegin(t *testing.T) {
	Begin(context.Background())
	n := 0
	ctx := WithBegin(context.Background(), func() { n++ })
	Begin(ctx)
	Begin(context.WithValue(ctx, struct{}{}, 1)) // through a derived context
	if n != 2 {
		t.Fatalf("begin called %d times, want 2", n)
	}
}
