package core

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry("test: thing", func(_ string, v int) string {
		if v < 0 {
			return "negative"
		}
		return ""
	})
	r.Register("b", 2)
	r.Register("a", 1)
	if v, ok := r.Lookup("a"); !ok || v != 1 {
		t.Fatalf("Lookup(a) = %v, %v", v, ok)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Fatal("Lookup of an unknown name: ok")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v, want sorted [a b]", got)
	}
	var seen []string
	r.Each(func(n string, v int) { seen = append(seen, fmt.Sprint(n, v)) })
	if !slices.Equal(seen, []string{"a1", "b2"}) {
		t.Fatalf("Each saw %v", seen)
	}
	for _, tc := range []struct {
		name string
		reg  func()
		want string
	}{
		{"duplicate", func() { r.Register("a", 3) }, "test: thing a registered twice"},
		{"invalid", func() { r.Register("n", -1) }, "test: thing n: negative"},
		{"empty name", func() { r.Register("", 1) }, "empty name"},
		{"nil factory", func() { NewRegistry[func()]("test: f", NotNil[func()]).Register("f", nil) }, "nil factory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("panic %v, want one containing %q", p, tc.want)
				}
			}()
			tc.reg()
		})
	}
}

// Registering and looking up from many goroutines at once is safe: an
// unlocked map fails this under `go test -race`, and can fail it without
// (Go's map reports concurrent writes).
func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry[int]("test: concurrent", nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(2)
		go func() { defer wg.Done(); r.Register(fmt.Sprint("k", i), i) }()
		go func() { defer wg.Done(); r.Lookup("k0"); r.Names() }()
	}
	wg.Wait()
	if n := len(r.Names()); n != 16 {
		t.Fatalf("%d names, want 16", n)
	}
}
