package tokenizer

// The byte-level alphabet maps every byte to a printable rune so that BPE
// vocabularies can be stored as text: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100 onwards, in byte order.

var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode undoes the byte-level mapping of one token. ok is false when
// a rune of tok is outside the alphabet; the caller then uses tok's own bytes,
// as the reference decoder does.
func byteLevelDecode(tok string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(tok))
	for _, r := range tok {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}
