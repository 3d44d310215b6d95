// Package graceful lets the code that does a command's work tell the
// command's signal handler when that work has begun: from then on a
// cancelled context is honoured at a step boundary and the work tidies up
// after itself (a checkpoint, a half-made directory removed), so a signal
// should cancel the context; before, a signal may end the process at once
// (cli.StagedSignalContext).
package graceful

import "context"

type key struct{}

// WithBegin returns a copy of ctx whose Begin calls begin (which must be
// safe to call more than once, from any goroutine).
func WithBegin(ctx context.Context, begin func()) context.Context {
	return context.WithValue(ctx, key{}, begin)
}

// Begin tells ctx's signal handler, if it has one, that the work that
// stops cleanly on cancellation begins now. Without one it does nothing.
func Begin(ctx context.Context) {
	if f, ok := ctx.Value(key{}).(func()); ok {
		f()
	}
}
