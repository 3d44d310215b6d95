package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// Reading a request body. The decoder reads through a bodyGuard, which
// refuses what no request the server takes could hold as soon as it shows:
// a string longer than its field's limit, more white space in a row or a
// longer number than any request needs, more JSON in the small fields
// than they could use, and text that is not UTF-8 (encoding/json would
// silently turn it into U+FFFD, as it would a lone UTF-16 surrogate
// escape). So a huge body costs neither memory nor time past that point,
// and the answer names the field being read.

const (
	// MaxNameBytes bounds the free-text fields other than the prompt and
	// the messages: user and model, in bytes of UTF-8.
	MaxNameBytes = 256
	// maxOtherBytes bounds the JSON of every field but the prompt (of a
	// completions request) or the messages (of a chat), together.
	maxOtherBytes = 1 << 20
	// maxSpaceRun is the most white space in a row a body may hold, and
	// maxScalarBytes the longest number or literal (true, false, null).
	maxSpaceRun    = 4096
	maxScalarBytes = 256
	// maxKeyBytes bounds a field name, in bytes of JSON.
	maxKeyBytes = 256
	// escapeBytes is the most bytes of JSON one byte of text can take
	// (\u0001 is 6 bytes; a surrogate pair is 12 for a 4-byte character),
	// so a JSON string of more than escapeBytes x N bytes holds more than
	// N bytes of text.
	escapeBytes = 6
	// readChunk is the most the guard hands the decoder at once. The
	// decoder reads only to finish the value it is on, so it is never
	// more than readChunk bytes ahead of it: a string limit, which is
	// never below readChunk, is not applied to the next field's bytes.
	readChunk = 256
)

// completionBodyLimit is the largest completions body read: the other
// fields' 1 MiB and, for each prompt a request may hold (MaxRows), a text
// at its limit (MaxTextBytesPerToken per position) with every byte
// escaped; a list of token ids filling the context is shorter. At most
// MaxBody.
func completionBodyLimit(m *Model, o Options) int64 {
	perPrompt := escapeBytes*MaxTextBytesPerToken*int64(m.MaxLen) + 16
	return min(o.MaxBody, maxOtherBytes+int64(o.MaxRows)*perPrompt)
}

// chatBodyLimit is the largest chat completions body read: messages whose
// rendering could fit the model (MaxTextBytesPerToken bytes per position,
// up to 8 bytes of JSON each) and a MiB for the rest, at most MaxBody.
func chatBodyLimit(m *Model, o Options) int64 {
	return min(o.MaxBody, maxOtherBytes+8*MaxTextBytesPerToken*int64(m.MaxLen))
}

// limitWhy is what a 413 says of a body limit: why, how it was drawn from
// the server's limits, unless MaxBody is below it.
func limitWhy(why string, limit int64, o Options) string {
	if o.MaxBody > 0 && limit >= o.MaxBody {
		return "this server reads"
	}
	return why
}

// faultKind is what the guard refused.
type faultKind int

const (
	faultUTF8      faultKind = iota + 1 // a byte that is not UTF-8
	faultSurrogate                      // a \uD800-\uDFFF escape not in a pair
	faultString                         // a string past its field's limit
	faultSpace                          // more than maxSpaceRun bytes of white space in a row
	faultScalar                         // a number or literal of more than maxScalarBytes
	faultField                          // the small fields past maxOtherBytes together
)

// guardError is the guard's refusal: what, and at which byte of the body.
type guardError struct {
	kind   faultKind
	offset int64 // 1-based
	// limit and why describe the string limit in force (faultString).
	limit int
	why   string
}

func (e *guardError) Error() string { return fmt.Sprintf("refused at byte %d of the body", e.offset) }

// bodyGuard is an io.Reader for a json.Decoder that scans what it hands
// out. It hands out every byte before a fault and then the fault, so the
// decoder fails while it reads the value that holds it.
type bodyGuard struct {
	r   io.Reader
	off int64 // bytes handed out
	err error // sticky, once a fault or a read error shows
	// end, when windowed, is the offset the decoder may not read past
	// (the small fields' budget).
	end      int64
	windowed bool
	// strCap is the longest string allowed now, in bytes of JSON between
	// the quotes; strLimit and strWhy are the text limit it stands for.
	strCap   int
	strLimit int
	strWhy   string

	// The scanner: inside a string; its escape state (0, 1 after '\',
	// 2-5 in the hex digits of \u); the \u value; a high surrogate was
	// read and a low one must follow; the current run of string bytes,
	// white space (runKind 1) or scalar bytes (runKind 2); UTF-8
	// continuation bytes expected and the range of the next one.
	inStr   bool
	esc     int
	hex     rune
	lowNext bool
	run     int
	runKind int
	need    int
	lo, hi  byte
	// seqAt is where the current UTF-8 character began, escAt the
	// current escape's backslash, highAt the unpaired high surrogate's.
	seqAt, escAt, highAt int64
}

func newBodyGuard(r io.Reader) *bodyGuard {
	return &bodyGuard{r: r, strCap: maxKeyBytes, strLimit: maxKeyBytes, strWhy: "a field name"}
}

// strings sets the limit of the strings read from now: limit bytes of
// text (what the error says, with why), so escapeBytes*limit of JSON.
func (g *bodyGuard) strings(limit int, why string) {
	g.strCap, g.strLimit, g.strWhy = max(readChunk, escapeBytes*limit), limit, why
}

// keys sets the limit of a field name, before one is read.
func (g *bodyGuard) keys() {
	g.strCap, g.strLimit, g.strWhy = maxKeyBytes, maxKeyBytes, "a field name"
}

// window lets the decoder read at most n more bytes (none for n <= 0).
func (g *bodyGuard) window(n int64) { g.end, g.windowed = g.off+max(n, 0), true }

// noWindow lifts the window.
func (g *bodyGuard) noWindow() { g.windowed = false }

func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	if g.windowed {
		room := g.end - g.off
		if room <= 0 {
			g.err = &guardError{kind: faultField, offset: g.off + 1}
			return 0, g.err
		}
		if int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := g.r.Read(p)
	for i := range n {
		if k, at := g.step(p[i], g.off+int64(i)+1); k != 0 {
			g.err = &guardError{kind: k, offset: at, limit: g.strLimit, why: g.strWhy}
			g.off += int64(i)
			return i, g.err
		}
	}
	g.off += int64(n)
	if err == io.EOF && g.need > 0 {
		g.err = &guardError{kind: faultUTF8, offset: g.seqAt}
		return n, g.err
	}
	if err != nil && err != io.EOF {
		g.err = err
	}
	return n, err
}

// step scans byte c, at offset at (1-based), returning the fault it
// shows (0: none) and the offset to report: where the character or the
// escape at fault began.
func (g *bodyGuard) step(c byte, at int64) (faultKind, int64) {
	if g.need > 0 { // a UTF-8 continuation byte
		if c < g.lo || c > g.hi {
			return faultUTF8, g.seqAt
		}
		g.need--
		g.lo, g.hi = 0x80, 0xBF
	} else if c >= 0x80 { // the first byte of a multi-byte character
		g.lo, g.hi, g.seqAt = 0x80, 0xBF, at
		switch {
		case c >= 0xC2 && c <= 0xDF:
			g.need = 1
		case c == 0xE0:
			g.need, g.lo = 2, 0xA0
		case c == 0xED: // not the surrogates
			g.need, g.hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			g.need = 2
		case c == 0xF0:
			g.need, g.lo = 3, 0x90
		case c == 0xF4: // not past U+10FFFF
			g.need, g.hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			g.need = 3
		default:
			return faultUTF8, at
		}
	}
	if g.inStr {
		return g.stringByte(c, at)
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		if g.runKind != 1 {
			g.runKind, g.run = 1, 0
		}
		if g.run++; g.run > maxSpaceRun {
			return faultSpace, at
		}
	case '"':
		g.inStr, g.run, g.runKind = true, 0, 0
	case '{', '}', '[', ']', ',', ':':
		g.runKind, g.run = 0, 0
	default: // a number or literal (or what the decoder will refuse)
		if g.runKind != 2 {
			g.runKind, g.run = 2, 0
		}
		if g.run++; g.run > maxScalarBytes {
			return faultScalar, at
		}
	}
	return 0, 0
}

// stringByte scans byte c, at offset at, inside a string.
func (g *bodyGuard) stringByte(c byte, at int64) (faultKind, int64) {
	if c == '"' && g.esc == 0 {
		if g.lowNext {
			return faultSurrogate, g.highAt
		}
		g.inStr, g.run = false, 0
		return 0, 0
	}
	if g.run++; g.run > g.strCap {
		return faultString, at
	}
	switch {
	case g.esc == 1:
		if c == 'u' {
			g.esc, g.hex = 2, 0
			return 0, 0
		}
		g.esc = 0
		if g.lowNext {
			return faultSurrogate, g.highAt
		}
	case g.esc >= 2:
		d := hexDigit(c)
		if d < 0 {
			g.esc = 0 // not JSON: the decoder says so
			return 0, 0
		}
		g.hex = g.hex<<4 | d
		if g.esc++; g.esc < 6 {
			return 0, 0
		}
		g.esc = 0
		switch low := g.hex >= 0xDC00 && g.hex <= 0xDFFF; {
		case g.lowNext:
			if !low {
				return faultSurrogate, g.highAt
			}
			g.lowNext = false
		case g.hex >= 0xD800 && g.hex <= 0xDBFF:
			g.lowNext, g.highAt = true, g.escAt
		case low:
			return faultSurrogate, g.escAt
		}
	case c == '\\':
		g.esc, g.escAt = 1, at
	case g.lowNext:
		return faultSurrogate, g.highAt
	}
	return 0, 0
}

func hexDigit(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// bodyReader decodes one request body through a guard. limitWhy says how
// the body's size limit (http.MaxBytesReader's) was drawn, for its 413.
type bodyReader struct {
	dec      *json.Decoder
	g        *bodyGuard
	limitWhy string
	// other is what is left of maxOtherBytes for the small fields.
	other int64
}

func newBodyReader(r io.Reader, limitWhy string) *bodyReader {
	g := newBodyGuard(r)
	dec := json.NewDecoder(g)
	dec.UseNumber()
	return &bodyReader{dec: dec, g: g, limitWhy: limitWhy, other: maxOtherBytes}
}

// fail is the answer to an error reading what (a field, prompt[i], or
// "request body"): 413 past a size limit, else 400, naming what.
func (b *bodyReader) fail(what string, err error) *apiError {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body: more than %d bytes, the most %s; refused while reading %s", mb.Limit, b.limitWhy, what)}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if b.dec.InputOffset() == 0 {
			return badRequest("request body: empty (want a JSON object)")
		}
		return badRequest("%s: the body ends at byte %d, inside the JSON object: truncated (was the request cut short, or its Content-Length wrong?)", what, b.dec.InputOffset())
	}
	var ge *guardError
	if !errors.As(err, &ge) {
		return badRequest("request body: want a JSON object (%v)", err)
	}
	switch ge.kind {
	case faultUTF8:
		return badRequest("%s: invalid UTF-8 at byte %d of the body (JSON text must be UTF-8)", what, ge.offset)
	case faultSurrogate:
		return badRequest("%s: a UTF-16 surrogate escape not in a pair at byte %d of the body (it is not a character)", what, ge.offset)
	case faultString:
		return badRequest("%s: more than %d bytes (%s); refused at byte %d of the body", what, ge.limit, ge.why, ge.offset)
	case faultSpace:
		return badRequest("%s: more than %d bytes of white space in a row at byte %d of the body", what, maxSpaceRun, ge.offset)
	case faultScalar:
		return badRequest("%s: a number or literal of more than %d bytes at byte %d of the body", what, maxScalarBytes, ge.offset)
	}
	return &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: the fields other than the prompt or the messages take more than %d bytes of JSON together, the most they could use; refused at byte %d of the body",
		what, maxOtherBytes, ge.offset)}
}

// object reads the body's JSON object, calling big for the value of the
// key bigKey (which reads it from b.dec, with no byte budget) and
// keeping every other field's raw value, within maxOtherBytes together
// and at most maxFields of them. textLimit is the longest string a field
// other than user and model may hold (theirs is MaxNameBytes), in bytes
// of text.
func (b *bodyReader) object(bigKey string, big func() *apiError, textLimit int, textWhy string) (map[string]json.RawMessage, *apiError) {
	t, err := b.dec.Token()
	if err != nil {
		return nil, b.fail("request body", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, badRequest("request body: want a JSON object")
	}
	f := map[string]json.RawMessage{}
	seenBig := false
	b.g.window(b.other)
	for b.dec.More() {
		start := b.dec.InputOffset()
		b.g.keys()
		t, err := b.dec.Token()
		if err != nil {
			return nil, b.fail("request body", err)
		}
		key, _ := t.(string)
		if _, dup := f[key]; dup || key == bigKey && seenBig {
			return nil, duplicateKey(key)
		}
		if key == bigKey {
			seenBig = true
			b.g.noWindow()
			b.g.strings(textLimit, textWhy)
			if aerr := big(); aerr != nil {
				return nil, aerr
			}
			b.g.window(b.other)
			continue
		}
		if key == "user" || key == "model" {
			b.g.strings(MaxNameBytes, "the limit of user and model")
		} else {
			b.g.strings(textLimit, textWhy)
		}
		var raw json.RawMessage
		if err := b.dec.Decode(&raw); err != nil {
			return nil, b.fail(key, err)
		}
		if path := repeatedKey(raw, key); path != "" {
			return nil, duplicateKey(path)
		}
		b.other -= b.dec.InputOffset() - start
		b.g.window(b.other)
		if f[key] = raw; len(f) > maxFields {
			return nil, badRequest("request body: more than %d fields (docs/serve.md lists the fields the server takes)", maxFields)
		}
	}
	b.g.keys()
	if _, err := b.dec.Token(); err != nil { // the closing brace
		return nil, b.fail("request body", err)
	}
	if _, err := b.dec.Token(); err != io.EOF {
		if err != nil {
			return nil, b.fail("request body", err)
		}
		return nil, badRequest("request body: want one JSON object, got more after it")
	}
	return f, nil
}

// duplicateKey is the answer to a key given twice in one JSON object,
// which encoding/json would settle silently by keeping the last.
func duplicateKey(path string) *apiError {
	return badRequest("%s: given twice in one JSON object (which one was meant is not plain: refused)", path)
}

// repeatedKey is the path (under path, the value's own name) of the first
// key that raw, a valid JSON value, holds twice in one object at any
// depth, e.g. "messages[0].role"; "" when none does.
func repeatedKey(raw json.RawMessage, path string) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	found, _ := repeatedIn(dec, path)
	return found
}

// repeatedIn reads one value from dec (valid JSON) and reports the path of
// a repeated key within it.
func repeatedIn(dec *json.Decoder, path string) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return "", nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := t.(string)
			if seen[k] {
				return keyPath(path, k), nil
			}
			seen[k] = true
			if found, err := repeatedIn(dec, keyPath(path, k)); found != "" || err != nil {
				return found, err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if found, err := repeatedIn(dec, fmt.Sprintf("%s[%d]", path, i)); found != "" || err != nil {
				return found, err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

// keyPath is key k of the object at path ("" for the body itself).
func keyPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// maxFields bounds the fields of a request (the server takes 24).
const maxFields = 64

// nameField checks a free-text field (user, model): a string of at most
// MaxNameBytes bytes, or absent.
func nameField(f map[string]json.RawMessage, key string) *apiError {
	raw := value(f, key)
	if raw == nil {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return badRequest("%s: want a string, got %s", key, short(raw))
	}
	if len(s) > MaxNameBytes {
		return badRequest("%s: %d bytes, more than %d (the limit of user and model)", key, len(s), MaxNameBytes)
	}
	return nil
}

// unknownFields names the fields of f not in allowed, at most 10, sorted.
func unknownFields(f map[string]json.RawMessage, allowed map[string]bool) string {
	var unknown []string
	for k := range f {
		if !allowed[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	sort.Strings(unknown)
	if len(unknown) > 10 {
		return strings.Join(unknown[:10], ", ") + fmt.Sprintf(" and %d more", len(unknown)-10)
	}
	return strings.Join(unknown, ", ")
}
