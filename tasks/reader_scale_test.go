package tasks

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// BenchmarkReadMathParquetScale reads parquet files of 1k, 10k and 100k
// rows: the time per row should stay flat (the reader is linear in its
// input; issue 33 asked for it to be shown).
//
//	go test ./tasks -run '^$' -bench ReadMathParquetScale -benchtime 3x
func BenchmarkReadMathParquetScale(b *testing.B) {
	type row struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
	}
	for _, n := range []int{1000, 10000, 100000} {
		rows := make([]row, n)
		for i := range rows {
			rows[i] = row{"What is " + strconv.Itoa(i) + " + 1?", "#### " + strconv.Itoa(i+1)}
		}
		var buf bytes.Buffer
		if err := parquet.Write(&buf, rows); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				got, err := ReadMathParquet(bytes.NewReader(data), int64(len(data)), "f.parquet", MathKeys{})
				if err != nil || len(got) != n {
					b.Fatal(err, len(got))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
		})
	}
}
