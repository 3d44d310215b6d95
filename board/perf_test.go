package board

import (
	"bufio"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// writeBigRun writes a run of steps rows x metrics metrics (a value each,
// every step), as the trainer formats them.
func writeBigRun(tb testing.TB, dir string, from, steps, metrics int) {
	tb.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(fmt.Sprintf("train:\n    steps: %d\n", steps*2)), 0o644)
	f, err := os.OpenFile(filepath.Join(dir, "metrics.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 0, 16<<10)
	for s := from; s < from+steps; s++ {
		buf = append(buf[:0], `{"step":`...)
		buf = strconv.AppendInt(buf, int64(s), 10)
		for m := range metrics {
			buf = append(buf, `,"group`...)
			buf = strconv.AppendInt(buf, int64(m%10), 10)
			buf = append(buf, `/metric_`...)
			buf = strconv.AppendInt(buf, int64(m), 10)
			buf = append(buf, `":`...)
			buf = strconv.AppendFloat(buf, math.Sin(float64(s*(m+1))/997)+float64(m), 'g', -1, 64)
		}
		buf = append(buf, "}\n"...)
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkBigRun times what the page asks for a run of 10,000 steps x
// 200 metrics (docs/board.md has the numbers): the list and one metric's
// series on a server that has not read the run yet (cold), again (warm),
// and after 10 more rows (incremental).
//
//	go test ./board -run '^$' -bench BigRun -benchtime 5x
func BenchmarkBigRun(b *testing.B) {
	dir := b.TempDir()
	run := filepath.Join(dir, "big")
	writeBigRun(b, run, 0, 10000, 200)
	fi, _ := os.Stat(filepath.Join(run, "metrics.jsonl"))
	b.Logf("metrics.jsonl: %.1f MB", float64(fi.Size())/1e6)
	ask := func(b *testing.B, s *Server, ts *httptest.Server) {
		s.listMu.Lock()
		s.list = nil // no listing reused: each is made anew
		s.listMu.Unlock()
		var l listing
		get(b, ts, "/api/list", &l)
		var r struct {
			Series map[string]*seriesOut `json:"series"`
		}
		get(b, ts, "/api/series?id=0/big&m=group3/metric_123", &r)
		if s := r.Series["group3/metric_123"]; s == nil || s.N < 10000 || len(s.X) > 2000 || len(l.Items) != 1 {
			b.Fatalf("series %+v, list %+v", s, l.Items)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			s, _ := New(Options{Dirs: []string{dir}})
			ts := httptest.NewServer(s)
			ask(b, s, ts)
			ts.Close()
			s.Close()
		}
	})
	s, _ := New(Options{Dirs: []string{dir}})
	ts := httptest.NewServer(s)
	defer func() { ts.Close(); s.Close() }()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	ask(b, s, ts)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.Logf("heap held for the run once read: %.1f MB", float64(m1.HeapAlloc-m0.HeapAlloc)/1e6)
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			ask(b, s, ts)
		}
	})
	next := 10000
	b.Run("incremental", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			writeBigRun(b, run, next, 10, 200)
			next += 10
			b.StartTimer()
			ask(b, s, ts)
		}
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			s.listMu.Lock()
			s.list = nil
			s.listMu.Unlock()
			var l listing
			get(b, ts, "/api/list", &l)
		}
	})
}
