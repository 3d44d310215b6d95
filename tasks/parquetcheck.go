package tasks

// Checks of a parquet file's own claims, made before the parquet library
// (github.com/parquet-go/parquet-go) acts on them: the library allocates
// what a footer length, a page header or a run-length header says, so a
// corrupt file of a few kilobytes could make it allocate gigabytes (found
// by FuzzMathParquet). Each check turns such a file into an error.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// checkParquetFrame checks the magic bytes at both ends and that the footer
// length fits in the file, before the parquet library allocates a buffer
// of the length the file claims.
func checkParquetFrame(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes, too short for a parquet file", size)
	}
	var head, tail [8]byte
	if _, err := r.ReadAt(head[:4], 0); err != nil {
		return err
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) == "PARE" {
		return errors.New("the footer is encrypted (magic \"PARE\"), which cde does not read")
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return errors.New("no parquet magic bytes (\"PAR1\") at its start and end")
	}
	footer := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footer > size-12 {
		return fmt.Errorf("footer of %d bytes in a file of %d", footer, size)
	}
	b := make([]byte, footer)
	if _, err := r.ReadAt(b, size-8-footer); err != nil {
		return err
	}
	if _, err := checkThrift(b); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	return nil
}

// maxThriftDepth bounds the nesting of thrift structures and lists
// (parquet's deepest is about 6).
const maxThriftDepth = 64

// checkThrift walks one thrift compact-protocol struct at the start of b
// and returns its length. It checks that every binary, list, set and map
// length fits in the bytes that remain (each element takes at least one
// byte), so that decoding b allocates in proportion to len(b); the
// library's decoder allocates a list's or a string's claimed length first.
func checkThrift(b []byte) (int, error) {
	w := thriftWalker{b: b}
	if err := w.structure(0); err != nil {
		return 0, fmt.Errorf("thrift: %w at byte %d", err, w.i)
	}
	return w.i, nil
}

type thriftWalker struct {
	b []byte
	i int
}

var errThriftEOF = errors.New("truncated")

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.i:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	w.i += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.i) {
		return errThriftEOF
	}
	w.i += int(n)
	return nil
}

func (w *thriftWalker) byte() (byte, error) {
	if w.i >= len(w.b) {
		return 0, errThriftEOF
	}
	w.i++
	return w.b[w.i-1], nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth > maxThriftDepth {
		return errors.New("nested too deeply")
	}
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if h>>4 == 0 { // long form: the field id follows
			if _, err := w.uvarint(); err != nil {
				return err
			}
		}
		if err := w.value(h&0x0f, depth, false); err != nil {
			return err
		}
	}
}

// value skips one value of compact type t; inList says it is a list, set or
// map element (a boolean element then takes a byte).
func (w *thriftWalker) value(t byte, depth int, inList bool) error {
	switch t {
	case 1, 2: // boolean true, false: in a struct, the type is the value
		if inList {
			return w.skip(1)
		}
		return nil
	case 3: // i8
		return w.skip(1)
	case 4, 5, 6: // i16, i32, i64
		_, err := w.uvarint()
		return err
	case 7: // double
		return w.skip(8)
	case 8: // binary
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case 9, 10: // list, set
		h, err := w.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return err
			}
		}
		if n > uint64(len(w.b)-w.i) {
			return fmt.Errorf("list of %d elements in %d bytes", n, len(w.b)-w.i)
		}
		for range n {
			if err := w.value(h&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 11: // map
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		if 2*n > uint64(len(w.b)-w.i) {
			return fmt.Errorf("map of %d entries in %d bytes", n, len(w.b)-w.i)
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1, true); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 12: // struct
		return w.structure(depth + 1)
	case 13: // uuid
		return w.skip(16)
	}
	return fmt.Errorf("unknown type %d", t)
}

// MaxParquetUncompressed bounds the uncompressed size of a parquet file's
// column data (16 GiB), and with it what a corrupt file can make the reader
// allocate; a column chunk may also expand at most 1000-fold.
const MaxParquetUncompressed = 16 << 30

// checkParquetMetadata checks the footer's claims against the file: row
// counts, and every column chunk inside the file with sizes in bounds.
func checkParquetMetadata(md *format.FileMetaData, size int64) error {
	if md.NumRows < 0 || md.NumRows > math.MaxInt32 {
		return fmt.Errorf("%d rows", md.NumRows)
	}
	var rows, total int64
	for g, rg := range md.RowGroups {
		if rg.NumRows < 0 || rg.NumRows > md.NumRows-rows {
			return fmt.Errorf("row group %d: %d rows (the file says %d in all)", g, rg.NumRows, md.NumRows)
		}
		rows += rg.NumRows
		for c, cc := range rg.Columns {
			m := cc.MetaData
			where := fmt.Sprintf("row group %d, column %d", g, c)
			if cc.FilePath != "" {
				return fmt.Errorf("%s: data in another file (%q), which cde does not read", where, cc.FilePath)
			}
			if m.NumValues < 0 || m.TotalCompressedSize < 0 || m.TotalCompressedSize > size || m.TotalUncompressedSize < 0 {
				return fmt.Errorf("%s: %d values, %d bytes compressed, %d uncompressed", where, m.NumValues, m.TotalCompressedSize, m.TotalUncompressedSize)
			}
			start := chunkStart(m)
			if start < 4 || start > size-8-m.TotalCompressedSize {
				return fmt.Errorf("%s: %d bytes at offset %d, outside the file's %d bytes", where, m.TotalCompressedSize, start, size)
			}
			if m.TotalUncompressedSize > 1000*m.TotalCompressedSize+1<<20 {
				return fmt.Errorf("%s: %d bytes would expand to %d", where, m.TotalCompressedSize, m.TotalUncompressedSize)
			}
			total += m.TotalUncompressedSize
			if total > MaxParquetUncompressed {
				return fmt.Errorf("over %d bytes of uncompressed column data (tasks.MaxParquetUncompressed)", int64(MaxParquetUncompressed))
			}
		}
	}
	if rows != md.NumRows {
		return fmt.Errorf("row groups hold %d rows, the file says %d", rows, md.NumRows)
	}
	return nil
}

// maxPageValues bounds the values one page may claim (2^26): far above a
// real page (parquet writers cut pages at about 1 MiB) and small enough
// that the reader's per-value buffers stay bounded.
const maxPageValues = 1 << 26

// checkParquetPages reads every page header of every column chunk (from the
// bytes checkParquetMetadata bounded) and checks each page's sizes and value
// count, so that the parquet library never allocates what a corrupt header
// claims.
func checkParquetPages(r io.ReaderAt, md *format.FileMetaData, schema *parquet.Schema) error {
	proto := &thrift.CompactProtocol{}
	leaves := schema.Columns()
	for g, rg := range md.RowGroups {
		for c, cc := range rg.Columns {
			m := cc.MetaData
			start := chunkStart(m)
			buf := make([]byte, m.TotalCompressedSize)
			if _, err := r.ReadAt(buf, start); err != nil {
				return err
			}
			if c >= len(leaves) {
				return fmt.Errorf("row group %d: column %d of %d in the schema", g, c, len(leaves))
			}
			leaf, ok := schema.Lookup(leaves[c]...)
			if !ok {
				return fmt.Errorf("row group %d, column %d: not in the schema", g, c)
			}
			var expanded int64
			for off := 0; off < len(buf); {
				where := fmt.Sprintf("row group %d, column %d, page at byte %d", g, c, start+int64(off))
				var h format.PageHeader
				hn, err := checkThrift(buf[off:])
				if err != nil {
					return fmt.Errorf("%s: header: %w", where, err)
				}
				br := proto.NewReaderFromBytes(buf[off : off+hn])
				if err := thrift.NewDecoder(br).Decode(&h); err != nil {
					return fmt.Errorf("%s: header: %v", where, err)
				}
				off += br.BytesRead()
				if h.CompressedPageSize < 0 || int(h.CompressedPageSize) > len(buf)-off {
					return fmt.Errorf("%s: %d bytes, past the column chunk's end", where, h.CompressedPageSize)
				}
				if h.UncompressedPageSize < 0 || int64(h.UncompressedPageSize) > 1000*int64(h.CompressedPageSize)+1<<20 {
					return fmt.Errorf("%s: %d bytes would expand to %d", where, h.CompressedPageSize, h.UncompressedPageSize)
				}
				expanded += int64(h.UncompressedPageSize)
				values := int32(0)
				if d, ok := h.DataPageHeader.Get(); ok {
					values = d.NumValues
				} else if d, ok := h.DataPageHeaderV2.Get(); ok {
					values = d.NumValues
					if d.NumNulls < 0 || d.NumRows < 0 || d.DefinitionLevelsByteLength < 0 || d.RepetitionLevelsByteLength < 0 ||
						int64(d.DefinitionLevelsByteLength)+int64(d.RepetitionLevelsByteLength) > int64(h.CompressedPageSize) {
						return fmt.Errorf("%s: bad data page header %+v", where, d)
					}
				} else if d, ok := h.DictionaryPageHeader.Get(); ok {
					values = d.NumValues
				}
				if values < 0 || values > maxPageValues {
					return fmt.Errorf("%s: %d values", where, values)
				}
				body := buf[off : off+int(h.CompressedPageSize)]
				if err := checkPageRuns(&h, body, m.Codec, leaf.MaxRepetitionLevel, leaf.MaxDefinitionLevel); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				off += int(h.CompressedPageSize)
			}
			if expanded > m.TotalUncompressedSize+1<<20 {
				return fmt.Errorf("row group %d, column %d: pages expand to %d bytes, the column chunk says %d", g, c, expanded, m.TotalUncompressedSize)
			}
		}
	}
	return nil
}

// checkPageRuns checks the run-length/bit-packed hybrid streams of a data
// page (its repetition and definition levels, and its dictionary indices)
// hold no more values than the page header says: the library sizes its
// buffers from each run's count. Pages compressed with a codec other than
// snappy are not opened here (their streams are checked by the library
// alone); see docs/math.md.
func checkPageRuns(h *format.PageHeader, body []byte, codec format.CompressionCodec, maxRep, maxDef int) error {
	var (
		n                  int
		enc, repEnc, defEn format.Encoding
		v2                 bool
		d2                 format.DataPageHeaderV2
	)
	if d, ok := h.DataPageHeader.Get(); ok {
		n, enc, repEnc, defEn = int(d.NumValues), d.Encoding, d.RepetitionLevelEncoding, d.DefinitionLevelEncoding
	} else if d, ok := h.DataPageHeaderV2.Get(); ok {
		n, enc, v2, d2 = int(d.NumValues), d.Encoding, true, d
	} else {
		if _, ok := h.DictionaryPageHeader.Get(); ok && codec == format.Snappy {
			size, err := snappy.DecodedLen(body)
			if err != nil {
				return fmt.Errorf("snappy: %v", err)
			}
			if size > int(h.UncompressedPageSize) {
				return fmt.Errorf("snappy data of %d bytes in a page of %d", size, h.UncompressedPageSize)
			}
		}
		return nil
	}
	uncompress := func(b []byte) ([]byte, bool, error) {
		switch codec {
		case format.Uncompressed:
			return b, true, nil
		case format.Snappy:
			size, err := snappy.DecodedLen(b)
			if err != nil {
				return nil, false, fmt.Errorf("snappy: %v", err)
			}
			if size > int(h.UncompressedPageSize) {
				return nil, false, fmt.Errorf("snappy data of %d bytes in a page of %d", size, h.UncompressedPageSize)
			}
			out, err := snappy.Decode(make([]byte, size), b)
			if err != nil {
				return nil, false, fmt.Errorf("snappy: %v", err)
			}
			return out, true, nil
		}
		return nil, false, nil
	}
	var values []byte
	if v2 {
		levels := int(d2.RepetitionLevelsByteLength) + int(d2.DefinitionLevelsByteLength)
		if err := checkRuns(body[:d2.RepetitionLevelsByteLength], bitWidth(maxRep), n, "repetition levels"); maxRep > 0 && err != nil {
			return err
		}
		if err := checkRuns(body[d2.RepetitionLevelsByteLength:levels], bitWidth(maxDef), n, "definition levels"); maxDef > 0 && err != nil {
			return err
		}
		values = body[levels:]
		if compressed, set := d2.IsCompressed.Get(); compressed || !set {
			var ok bool
			var err error
			if values, ok, err = uncompress(values); err != nil || !ok {
				return err
			}
		}
	} else {
		page, ok, err := uncompress(body)
		if err != nil || !ok {
			return err
		}
		for _, lv := range []struct {
			max  int
			enc  format.Encoding
			what string
		}{{maxRep, repEnc, "repetition levels"}, {maxDef, defEn, "definition levels"}} {
			if lv.max == 0 {
				continue
			}
			if lv.enc != format.RLE {
				// BIT_PACKED levels have a fixed size the library computes.
				return nil
			}
			if len(page) < 4 {
				return fmt.Errorf("%s: page ends before their length", lv.what)
			}
			size := binary.LittleEndian.Uint32(page)
			if uint64(size) > uint64(len(page)-4) {
				return fmt.Errorf("%s: %d bytes, past the page's end", lv.what, size)
			}
			if err := checkRuns(page[4:4+size], bitWidth(lv.max), n, lv.what); err != nil {
				return err
			}
			page = page[4+size:]
		}
		values = page
	}
	if enc == format.RLEDictionary || enc == format.PlainDictionary {
		if len(values) == 0 {
			return nil
		}
		if values[0] > 32 {
			return fmt.Errorf("dictionary indices of %d bits", values[0])
		}
		return checkRuns(values[1:], int(values[0]), n, "dictionary indices")
	}
	return nil
}

// bitWidth is the bits needed for levels 0..max.
func bitWidth(max int) int { return bits.Len(uint(max)) }

// checkRuns walks a run-length/bit-packed hybrid stream of width-bit
// values: no run may hold more than n values (a final bit-packed group is
// padded to 8) and no bit-packed run may reach past the stream.
func checkRuns(b []byte, width, n int, what string) error {
	total := 0
	for i := 0; i < len(b); {
		h, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return fmt.Errorf("%s: bad run header at byte %d", what, i)
		}
		i += k
		var count, size uint64
		if h&1 == 1 {
			count = (h >> 1) * 8
			size = (h >> 1) * uint64(width)
		} else {
			count = h >> 1
			size = uint64((width + 7) / 8)
		}
		if count > uint64(n+7) || total+int(count) > n+7 {
			return fmt.Errorf("%s: runs hold over %d values, the page says %d", what, total+int(count), n)
		}
		if size > uint64(len(b)-i) {
			return fmt.Errorf("%s: a run of %d bytes past the stream's end", what, size)
		}
		total += int(count)
		i += int(size)
	}
	return nil
}

// chunkStart is the file offset of a column chunk's first page: its
// dictionary page when it has one before the data pages.
func chunkStart(m format.ColumnMetaData) int64 {
	if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < m.DataPageOffset {
		return m.DictionaryPageOffset
	}
	return m.DataPageOffset
}
