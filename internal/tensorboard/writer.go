// Package tensorboard writes a run's scalars as a TensorBoard event file,
// so that `tensorboard --logdir RUN` (or a bench's --out directory, one run
// per arm-seed) shows every metric of metrics.jsonl under the same name.
//
// An event file is a sequence of TFRecords, each framing one serialised
// Event message (eventpb):
//
//	uint64 length, little-endian
//	uint32 masked CRC-32C of those 8 bytes
//	length bytes of data
//	uint32 masked CRC-32C of the data
//
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32) and
// CRC-32C is the Castagnoli polynomial. The first record is an Event with
// file_version "brain.Event:2"; each later one carries a step's scalars as
// Summary values with simple_value (float32, as TensorBoard stores them).
// metrics.jsonl stays the source of truth: it keeps float64 and writes a
// non-finite value as null, where the event file keeps NaN and ±Inf.
//
// Config adds the run's configuration once, in one event: as the HParams
// plugin's session start (tag "_hparams_/session_start_info": a Summary
// value whose metadata names plugin "hparams" with a serialised
// HParamsPluginData of version 0 holding SessionStartInfo.hparams, one
// entry per configuration key in dotted form, and whose tensor is the
// plugin's placeholder, a float scalar 0), so TensorBoard's HParams view
// (and tools that read it, as a W&B sync) lists each run with its
// settings and can filter and sort runs by them; and as a text summary
// (tag "config", plugin "text": a string scalar holding the YAML as a
// Markdown code block).
package tensorboard

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/tensorboard/eventpb"
)

// FileVersion is the file_version of the first record.
const FileVersion = "brain.Event:2"

// suffix ends the names of the event files this package writes
// ("events.out.tfevents.<unix seconds>.cde"); TensorBoard reads any file
// whose name contains "tfevents".
const suffix = ".cde"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's masked CRC-32C of b.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Writer appends events to one run's event file.
type Writer struct {
	f     *os.File
	Path  string
	start int  // the step Open resumed at
	has   bool // the file holds the config (Config) already
}

// Open opens the event file of the run directory dir for appending:
// cde's existing one, with every record of a step >= start dropped (they
// were written after the checkpoint being resumed, as metrics.jsonl's
// lines are), or a new one opening with the file-version record. A torn
// last record (a crash mid-write) is dropped too.
func Open(dir string, start int) (*Writer, error) {
	old, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"+suffix))
	if err != nil {
		return nil, err
	}
	sort.Strings(old)
	var path string
	var keep bytes.Buffer
	hasConfig := false
	if len(old) > 0 {
		path = old[len(old)-1]
		events, err := ReadFile(path)
		if err != nil && !errors.Is(err, ErrTorn) {
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
		for _, e := range events {
			if e.GetFileVersion() != "" || e.Step < int64(start) {
				if err := appendEvent(&keep, e); err != nil {
					return nil, err
				}
				if isConfig(e) {
					hasConfig = true
				}
			}
		}
	} else {
		path = filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d%s", time.Now().Unix(), suffix))
		if err := appendEvent(&keep, &eventpb.Event{WallTime: wallTime(time.Now()),
			What: &eventpb.Event_FileVersion{FileVersion: FileVersion}}); err != nil {
			return nil, err
		}
	}
	if err := core.WriteFileAtomic(path, keep.Bytes()); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f, Path: path, start: start, has: hasConfig}, nil
}

func wallTime(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// Scalars appends one step's scalars, tags in sorted order, in one write
// (a reader never sees half a record but at a crash).
func (w *Writer) Scalars(step int, at time.Time, m map[string]float64) error {
	tags := make([]string, 0, len(m))
	for k := range m {
		tags = append(tags, k)
	}
	sort.Strings(tags)
	s := &eventpb.Summary{Value: make([]*eventpb.Summary_Value, len(tags))}
	for i, k := range tags {
		s.Value[i] = &eventpb.Summary_Value{Tag: k, Value: &eventpb.Summary_Value_SimpleValue{SimpleValue: float32(m[k])}}
	}
	var buf bytes.Buffer
	if err := appendEvent(&buf, &eventpb.Event{WallTime: wallTime(at), Step: int64(step), What: &eventpb.Event_Summary{Summary: s}}); err != nil {
		return err
	}
	_, err := w.f.Write(buf.Bytes())
	return err
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// appendEvent frames e as a TFRecord onto buf.
func appendEvent(buf *bytes.Buffer, e *eventpb.Event) error {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], MaskedCRC(head[:8]))
	buf.Write(head[:])
	buf.Write(data)
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], MaskedCRC(data))
	buf.Write(tail[:])
	return nil
}

// ErrTorn is returned (with the events before it) when a file ends inside
// a record.
var ErrTorn = errors.New("the file ends inside a record")

// maxRecord bounds a record's length (a corrupt length must not allocate
// gigabytes): 64 MiB, far above a step's scalars.
const maxRecord = 64 << 20

// ReadFile reads every event of an event file, checking both CRCs of
// every record. A file that ends inside a record returns the events before
// it and ErrTorn; any other damage is an error naming the record's offset.
func ReadFile(path string) ([]*eventpb.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var out []*eventpb.Event
	var off int64
	for {
		var head [12]byte
		n, err := io.ReadFull(r, head[:])
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s at byte %d (%d bytes of a record header): %w", path, off, n, ErrTorn)
		}
		if MaskedCRC(head[:8]) != binary.LittleEndian.Uint32(head[8:]) {
			return out, fmt.Errorf("%s: record at byte %d: length CRC mismatch", path, off)
		}
		size := binary.LittleEndian.Uint64(head[:8])
		if size > maxRecord {
			return out, fmt.Errorf("%s: record at byte %d: length %d exceeds %d", path, off, size, maxRecord)
		}
		data := make([]byte, size+4)
		if _, err := io.ReadFull(r, data); err != nil {
			return out, fmt.Errorf("%s at byte %d: %w", path, off, ErrTorn)
		}
		if MaskedCRC(data[:size]) != binary.LittleEndian.Uint32(data[size:]) {
			return out, fmt.Errorf("%s: record at byte %d: data CRC mismatch", path, off)
		}
		e := &eventpb.Event{}
		if err := proto.Unmarshal(data[:size], e); err != nil {
			return out, fmt.Errorf("%s: record at byte %d: %w", path, off, err)
		}
		out = append(out, e)
		off += 12 + int64(size) + 4
	}
}

// Names lists the logger names train.logger accepts.
var Names = []string{"jsonl", "tensorboard"}

// Scalar returns the float64 a scalar of e holds (tests, readers).
func Scalar(e *eventpb.Event, tag string) (float64, bool) {
	for _, v := range e.GetSummary().GetValue() {
		if v.Tag == tag {
			return float64(v.GetSimpleValue()), true
		}
	}
	return math.NaN(), false
}
