package board

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// series is one metric of a run: the steps it was logged at and its values.
type series struct {
	name string
	x, y []float64
}

// runCache is a run's metrics.jsonl read so far: per metric, its steps and
// values, an index kept as the file grows. update reads only what was
// appended since the last call (the file offset is kept), so a run that
// grows by a row costs one row; a file rewritten under it (a resume drops
// the rows after its checkpoint) is read again from the start. A large
// file read from the start is parsed in parallel, a part per core.
type runCache struct {
	mu   sync.Mutex
	fi   os.FileInfo // at the last update
	off  int64       // bytes consumed: whole lines only
	tail []byte      // the last bytes before off, to notice a rewrite
	used time.Time
	part
}

// part is the rows of a stretch of whole lines.
type part struct {
	metrics  map[string]*series
	rows     int
	last     float64 // the last row's step
	lines    int     // lines read
	bad      int     // lines that are not a metrics row (skipped)
	badLines []int   // the first maxBadLines of their line numbers (from 1)
	scratch  []kvb   // parseRowB's, reused row to row
	prev     []*series
}

// maxBadLines is how many corrupt line numbers are kept.
const maxBadLines = 10

const tailLen = 64

func (c *runCache) reset() {
	c.fi, c.off, c.tail = nil, 0, nil
	c.part = part{metrics: map[string]*series{}}
}

// parallelMin is the size from which a first read is split over the cores.
const parallelMin = 4 << 20

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
	if c.off == 0 && fi.Size() >= parallelMin && runtime.GOMAXPROCS(0) > 1 {
		if err := c.readParallel(f, fi.Size()); err != nil {
			return err
		}
		c.fi = fi
		return nil
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
		c.consumed(line)
	}
	c.fi = fi
	return nil
}

// consumed moves the offset past line and keeps the tail.
func (c *runCache) consumed(line []byte) {
	c.off += int64(len(line))
	if len(line) >= tailLen {
		c.tail = append(c.tail[:0], line[len(line)-tailLen:]...)
	} else {
		c.tail = append(c.tail, line...)
		c.tail = c.tail[max(0, len(c.tail)-tailLen):]
	}
}

// readParallel reads the whole lines of the first size bytes of f, split at
// line ends into a part per core, parsed at once and joined in order.
func (c *runCache) readParallel(f *os.File, size int64) error {
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	data = data[:n]
	end := bytes.LastIndexByte(data, '\n') + 1 // a line still being written waits
	data = data[:end]
	k := runtime.GOMAXPROCS(0)
	var cuts []int
	cuts = append(cuts, 0)
	for i := 1; i < k; i++ {
		at := max(len(data)*i/k, cuts[len(cuts)-1])
		nl := bytes.IndexByte(data[at:], '\n')
		if nl < 0 {
			break
		}
		cuts = append(cuts, at+nl+1)
	}
	cuts = append(cuts, len(data))
	parts := make([]part, len(cuts)-1)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[i]
			p.metrics = map[string]*series{}
			chunk := data[cuts[i]:cuts[i+1]]
			for len(chunk) > 0 {
				nl := bytes.IndexByte(chunk, '\n')
				p.add(chunk[:nl+1])
				chunk = chunk[nl+1:]
			}
		}()
	}
	wg.Wait()
	for i := range parts {
		c.join(&parts[i])
	}
	c.prev = nil
	c.consumed(data)
	return nil
}

// join appends the rows of q, which follow c's.
func (c *part) join(q *part) {
	for name, qs := range q.metrics {
		m := c.metrics[name]
		if m == nil {
			c.metrics[name] = qs
			continue
		}
		m.x = append(m.x, qs.x...)
		m.y = append(m.y, qs.y...)
	}
	for _, l := range q.badLines {
		if len(c.badLines) < maxBadLines {
			c.badLines = append(c.badLines, c.lines+l)
		}
	}
	if q.rows > 0 {
		c.last = q.last
	}
	c.rows += q.rows
	c.bad += q.bad
	c.lines += q.lines
}

// add appends one line's values; a line that is not a metrics row (not a
// JSON object, or no step) is counted as corrupt, a blank one skipped.
func (c *part) add(line []byte) {
	c.lines++
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	kv := parseRowB(line, c.scratch)
	if kv != nil {
		c.scratch = kv
	}
	var step float64
	hasStep := false
	for _, e := range kv {
		if string(e.key) == "step" {
			step, hasStep = e.v, true
		}
	}
	if !hasStep {
		c.bad++
		if len(c.badLines) < maxBadLines {
			c.badLines = append(c.badLines, c.lines)
		}
		return
	}
	j := 0
	for _, e := range kv {
		if string(e.key) == "step" {
			continue
		}
		// Rows name their metrics in the same order: try the previous
		// row's before the map.
		var m *series
		if j < len(c.prev) && c.prev[j].name == string(e.key) {
			m = c.prev[j]
		} else {
			m = c.metrics[string(e.key)]
			if m == nil {
				m = &series{name: string(e.key)}
				c.metrics[m.name] = m
			}
			if j < len(c.prev) {
				c.prev[j] = m
			} else {
				c.prev = append(c.prev, m)
			}
		}
		j++
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

// kvb is kv with the key as bytes of the line (valid while the line is).
type kvb struct {
	key []byte
	v   float64
}

// parseRow returns the numeric members of a flat JSON object (a
// metrics.jsonl line), null members left out; nil for a line that is not
// a JSON object.
func parseRow(line []byte, out []kv) []kv {
	b := parseRowB(line, nil)
	if b == nil {
		return nil
	}
	out = out[:0]
	for _, e := range b {
		out = append(out, kv{key: string(e.key), v: e.v})
	}
	return out
}

// parseRowB is parseRow with the keys as bytes of line. The common form
// (string keys without escapes, numbers or null) is scanned by hand;
// anything else goes through encoding/json.
func parseRowB(line []byte, out []kvb) []kvb {
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
			v, ok := fastFloat(line[v0:i])
			if !ok {
				var err error
				if v, err = strconv.ParseFloat(string(line[v0:i]), 64); err != nil {
					return nil
				}
			}
			out = append(out, kvb{key: key, v: v})
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

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// fastFloat parses the common decimal forms (-12.345, 0.5e-3) whose
// digits fit in 2^53 and whose power of ten is at most 22 either way:
// then the mantissa and the power are exact and one multiplication or
// division rounds correctly (Clinger's fast path), the value
// strconv.ParseFloat gives. ok is false for anything else.
func fastFloat(b []byte) (float64, bool) {
	i, n := 0, len(b)
	neg := false
	if i < n && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	digits, exp := 0, 0
	sawDigit, sawDot := false, false
	for ; i < n; i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			sawDigit = true
			if mant == 0 && c == '0' {
				if sawDot {
					exp--
				}
				continue
			}
			if digits >= 16 {
				return 0, false
			}
			mant = mant*10 + uint64(c-'0')
			digits++
			if sawDot {
				exp--
			}
		case c == '.' && !sawDot:
			sawDot = true
		case c == 'e' || c == 'E':
			if !sawDigit {
				return 0, false
			}
			e, err := strconv.Atoi(string(b[i+1:]))
			if err != nil || e > 400 || e < -400 {
				return 0, false
			}
			exp += e
			i = n
		default:
			return 0, false
		}
	}
	if !sawDigit || mant >= 1<<53 {
		return 0, false
	}
	f := float64(mant)
	switch {
	case mant == 0:
		f = 0
	case exp == 0:
	case exp > 0 && exp <= 22:
		f *= pow10[exp]
	case exp < 0 && exp >= -22:
		f /= pow10[-exp]
	default:
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// parseRowJSON is parseRowB's slow path: any JSON object, its number
// members kept.
func parseRowJSON(line []byte, out []kvb) []kvb {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	out = out[:0]
	for k, v := range m {
		if f, ok := v.(float64); ok {
			out = append(out, kvb{key: []byte(k), v: f})
		}
	}
	return out
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
