package core

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// Registry is the one registry type of cde: strategies, algorithms, policy
// losses, tasks and the policy losses' graphs are each a Registry of their
// factory or definition. Every operation takes its lock (a read lock to
// look up), so registering from init functions and looking up from several
// goroutines are both safe. Like database/sql.Register, Register panics on
// a duplicate name or an entry valid refuses.
type Registry[T any] struct {
	// what names the registry in panics ("core: policy loss").
	what string
	// valid checks an entry before it is registered ("" when it is fine,
	// else why not); nil accepts every entry.
	valid func(name string, v T) string
	mu    sync.RWMutex
	m     map[string]T
}

// NewRegistry returns an empty registry; what names it in panics, valid
// (may be nil) checks each entry.
func NewRegistry[T any](what string, valid func(name string, v T) string) *Registry[T] {
	return &Registry[T]{what: what, valid: valid, m: map[string]T{}}
}

// Register adds v under name; it panics on an empty or duplicate name and
// on an entry valid refuses.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		panic(r.what + ": registered with an empty name")
	}
	if r.valid != nil {
		if why := r.valid(name, v); why != "" {
			panic(fmt.Sprintf("%s %s: %s", r.what, name, why))
		}
	}
	if _, dup := r.m[name]; dup {
		panic(r.what + " " + name + " registered twice")
	}
	r.m[name] = v
}

// Lookup returns the entry of name.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sorted()
}

// Each calls f on every entry in name order, under the read lock (f must
// not register).
func (r *Registry[T]) Each(f func(name string, v T)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, n := range r.sorted() {
		f(n, r.m[n])
	}
}

// sorted lists the names, sorted; the caller holds the lock.
func (r *Registry[T]) sorted() []string {
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// NotNil is a Registry validity check for factories: it refuses a nil one.
func NotNil[T any](_ string, v T) string {
	if rv := reflect.ValueOf(any(v)); !rv.IsValid() || rv.Kind() == reflect.Func && rv.IsNil() {
		return "nil factory"
	}
	return ""
}
