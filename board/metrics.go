package board

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// series is one metric of a run: the steps it was logged at and its values.
type series struct{ x, y []float64 }

// runCache is a run's metrics.jsonl read so far. update reads only what
// was appended since the last call (the file offset is kept), so a run
// that grows by a row costs one row; a file rewritten under it (a resume
// drops the rows after its checkpoint) is read again from the start.
type runCache struct {
	mu      sync.Mutex
	fi      os.FileInfo // at the last update
	off     int64       // bytes consumed: whole lines only
	tail    []byte      // the last bytes before off, to notice a rewrite
	metrics map[string]*series
	rows    int
	last    float64 // the last row's step
	used    time.Time
	scratch []kv // parseRow's, reused row to row
}

const tailLen = 64

func (c *runCache) reset() {
	c.fi, c.off, c.tail, c.metrics, c.rows, c.last = nil, 0, nil, map[string]*series{}, 0, 0
}

// update reads what was appended to name (under r) since the last call.
func (c *runCache) update(r *os.Root, name string) error {
	if c.metrics == nil {
		c.reset()
	}
	fi, err := r.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		c.reset()
		return nil
	}
	if err != nil {
		return err
	}
	if c.fi != nil && (!os.SameFile(c.fi, fi) || fi.Size() < c.off) {
		c.reset()
	}
	if c.fi != nil && fi.Size() == c.off && fi.ModTime().Equal(c.fi.ModTime()) {
		return nil
	}
	f, err := r.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if c.off > 0 {
		buf := make([]byte, len(c.tail))
		if _, err := f.ReadAt(buf, c.off-int64(len(buf))); err != nil || !bytes.Equal(buf, c.tail) {
			c.reset()
		}
	}
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			break // EOF: a line still being written waits for the next call
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		c.add(line)
		c.off += int64(len(line))
		if len(line) >= tailLen {
			c.tail = append(c.tail[:0], line[len(line)-tailLen:]...)
		} else {
			c.tail = append(c.tail, line...)
			c.tail = c.tail[max(0, len(c.tail)-tailLen):]
		}
	}
	c.fi = fi
	return nil
}

// add appends one row's values.
func (c *runCache) add(line []byte) {
	var step float64
	hasStep := false
	kv := parseRow(line, c.scratch)
	if kv != nil {
		c.scratch = kv
	}
	for _, e := range kv {
		if e.key == "step" {
			step, hasStep = e.v, true
		}
	}
	if !hasStep {
		return // a torn line, or not a metrics row
	}
	for _, e := range kv {
		if e.key == "step" {
			continue
		}
		m := c.metrics[e.key]
		if m == nil {
			m = &series{}
			c.metrics[e.key] = m
		}
		m.x = append(m.x, step)
		m.y = append(m.y, e.v)
	}
	c.rows++
	c.last = step
}

// names are the run's metrics, sorted.
func (c *runCache) names() []string {
	out := make([]string, 0, len(c.metrics))
	for k := range c.metrics {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// kv is one numeric member of a metrics row.
type kv struct {
	key string
	v   float64
}

// parseRow returns the numeric members of a flat JSON object (a
// metrics.jsonl line), null members left out; nil for a line that is not
// a JSON object. The common form (string keys without escapes, numbers or
// null) is scanned by hand, keys interned through names; anything else
// goes through encoding/json.
func parseRow(line []byte, out []kv) []kv {
	out = out[:0]
	i, n := 0, len(line)
	ws := func() {
		for i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r') {
			i++
		}
	}
	ws()
	if i >= n || line[i] != '{' {
		return nil
	}
	i++
	ws()
	if i < n && line[i] == '}' {
		return out
	}
	for {
		ws()
		if i >= n || line[i] != '"' {
			return parseRowJSON(line, out)
		}
		i++
		k0 := i
		for i < n && line[i] != '"' && line[i] != '\\' {
			i++
		}
		if i >= n || line[i] != '"' {
			return parseRowJSON(line, out)
		}
		key := line[k0:i]
		i++
		ws()
		if i >= n || line[i] != ':' {
			return nil
		}
		i++
		ws()
		v0 := i
		for i < n && (line[i] == '-' || line[i] == '+' || line[i] == '.' || line[i] == 'e' || line[i] == 'E' || (line[i] >= '0' && line[i] <= '9')) {
			i++
		}
		switch {
		case i > v0:
			v, err := strconv.ParseFloat(string(line[v0:i]), 64)
			if err != nil {
				return nil
			}
			out = append(out, kv{key: internKey(key), v: v})
		case i+4 <= n && string(line[i:i+4]) == "null":
			i += 4
		default:
			return parseRowJSON(line, out)
		}
		ws()
		if i >= n {
			return nil
		}
		if line[i] == '}' {
			return out
		}
		if line[i] != ',' {
			return nil
		}
		i++
	}
}

// parseRowJSON is parseRow's slow path: any JSON object, its number
// members kept.
func parseRowJSON(line []byte, out []kv) []kv {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	out = out[:0]
	for k, v := range m {
		if f, ok := v.(float64); ok {
			out = append(out, kv{key: k, v: f})
		}
	}
	return out
}

// keys interns metric names: a 10k-row file names each metric 10k times.
var (
	keysMu sync.Mutex
	keys   = map[string]string{}
)

func internKey(b []byte) string {
	keysMu.Lock()
	defer keysMu.Unlock()
	if s, ok := keys[string(b)]; ok {
		return s
	}
	if len(keys) > 1<<16 {
		return string(b) // a file of ever-new names: stop interning
	}
	s := string(b)
	keys[s] = s
	return s
}

// decimate keeps at most limit points of (x, y): the first and the last,
// and between them, per bucket of consecutive points, the lowest and the
// highest, in step order, so spikes survive. Fewer points are returned
// as they are.
func decimate(x, y []float64, limit int) ([]float64, []float64) {
	n := len(x)
	if n <= limit || limit < 4 {
		return x, y
	}
	buckets := (limit - 2) / 2
	inner := n - 2
	ox := make([]float64, 0, limit)
	oy := make([]float64, 0, limit)
	ox, oy = append(ox, x[0]), append(oy, y[0])
	for b := range buckets {
		lo, hi := 1+b*inner/buckets, 1+(b+1)*inner/buckets
		if lo >= hi {
			continue
		}
		imin, imax := lo, lo
		for i := lo + 1; i < hi; i++ {
			if y[i] < y[imin] {
				imin = i
			}
			if y[i] > y[imax] {
				imax = i
			}
		}
		first, second := min(imin, imax), max(imin, imax)
		ox, oy = append(ox, x[first]), append(oy, y[first])
		if second != first {
			ox, oy = append(ox, x[second]), append(oy, y[second])
		}
	}
	ox, oy = append(ox, x[n-1]), append(oy, y[n-1])
	return ox, oy
}

// tailRow parses the last whole line of name (under r): the latest row,
// read without the rest of the file. nil when there is none.
func tailRow(r *os.Root, name string, size int64) []kv {
	f, err := r.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	for chunk := int64(64 << 10); ; chunk *= 4 {
		start := max(0, size-chunk)
		buf := make([]byte, size-start)
		k, err := f.ReadAt(buf, start)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		buf = buf[:k]
		end := bytes.LastIndexByte(buf, '\n')
		if end < 0 {
			if start == 0 || chunk > 16<<20 {
				return nil
			}
			continue
		}
		begin := bytes.LastIndexByte(buf[:end], '\n')
		if begin < 0 && start > 0 && chunk <= 16<<20 {
			continue // the line starts before this chunk
		}
		return parseRow(buf[begin+1:end], nil)
	}
}
