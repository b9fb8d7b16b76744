package openai

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tailgate-llm/tailgate/internal/hexdigit"
)

// The generic part of the fast path: a JSON scanner over one event's bytes
// that yields raw strings and number literals and skips what the OpenAI
// rules (chunk.go) do not read. It allocates nothing.

// parser walks one JSON value held in b, validating it as it goes.
type parser struct {
	b []byte
	i int
}

type syntaxError struct {
	msg    string
	offset int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.offset) }

func (p *parser) fail(msg string) error { return &syntaxError{msg, p.i} }

func (p *parser) ws() {
	// Servers rarely put white space between tokens: test the common
	// case with one comparison.
	for p.i < len(p.b) && p.b[p.i] <= ' ' {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// next skips white space, then consumes c if it is there. The byte at p.i
// is tested first, so the common case (no white space) makes no loop.
func (p *parser) next(c byte) bool {
	if i := p.i; i < len(p.b) {
		switch b := p.b[i]; {
		case b == c:
			p.i = i + 1
			return true
		case b > ' ':
			return false
		}
	}
	return p.wsNext(c)
}

func (p *parser) wsNext(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// after consumes the ',' or the close byte that follows a member or an
// element: more is true after a ','. White space after a ',' is left to
// the reader of the next member (key) or element (wsIf).
func (p *parser) after(close byte) (more bool, err error) {
	if i := p.i; i < len(p.b) {
		switch p.b[i] {
		case ',':
			p.i = i + 1
			return true, nil
		case close:
			p.i = i + 1
			return false, nil
		}
	}
	return p.afterWS(close)
}

func (p *parser) afterWS(close byte) (more bool, err error) {
	p.ws()
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ',':
			p.i++
			return true, nil
		case close:
			p.i++
			return false, nil
		}
	}
	if close == '}' {
		return false, p.fail("expected ',' or '}'")
	}
	return false, p.fail("expected ',' or ']'")
}

// wsIf skips white space, testing the common case (none) inline.
func (p *parser) wsIf() {
	if p.i < len(p.b) && p.b[p.i] <= ' ' {
		p.ws()
	}
}

// String scanning classes: 0 plain, 1 control (invalid), 2 quote,
// 3 backslash, 4 non-ASCII (needs UTF-8 coercion when decoded).
var strClass = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 1
	}
	t['"'] = 2
	t['\\'] = 3
	for c := 0x80; c < 0x100; c++ {
		t[c] = 4
	}
	return t
}()

const (
	strEscaped = 1 << iota // has a backslash escape
	strHigh                // has bytes ≥ 0x80
)

// SWAR constants: a byte repeated in each of a word's 8 bytes.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// special has the high bit set in each byte of w (8 string bytes, little
// endian) that str must look at: '"', '\\', a control byte (< 0x20), and,
// when high is swarHigh, a byte ≥ 0x80. Spurious bits appear only above a
// true one (a borrow runs upward from a byte that matched), so the lowest
// set bit marks the first such byte exactly; that is all str uses.
//
// Per byte x, with the top bit clear: x-0x20 wraps to a top bit only for
// x < 0x20, and (x^'"')-1 and (x^'\\')-1 only for x equal to the quote or
// backslash; bytes with the top bit set are masked out by &^w and put back
// by w&high.
func special(w, high uint64) uint64 {
	if high != 0 {
		return specialASCII(w)
	}
	q := w ^ (swarOnes * '"')
	bs := w ^ (swarOnes * '\\')
	return ((w - swarOnes*0x20) | (q - swarOnes) | (bs - swarOnes)) &^ w & swarHigh
}

// specialASCII is special with high set: a byte with its top bit set is
// flagged by w itself, so the &^w mask is not needed.
func specialASCII(w uint64) uint64 {
	q := w ^ (swarOnes * '"')
	bs := w ^ (swarOnes * '\\')
	return ((w - swarOnes*0x20) | (q - swarOnes) | (bs - swarOnes) | w) & swarHigh
}

// str reads the string at p.i and returns its raw contents (between the
// quotes) and flags saying whether decoding is more than a copy. Plain
// ASCII is scanned here 8 bytes at a time; anything else by strRest.
func (p *parser) str() (raw []byte, flags int, err error) {
	b, i := p.b, p.i
	if i >= len(b) || b[i] != '"' {
		return nil, 0, p.fail("expected string")
	}
	start := i + 1
	for i = start; len(b)-i >= 8; i += 8 {
		if m := specialASCII(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			if b[i] == '"' {
				p.i = i + 1
				return b[start:i], 0, nil
			}
			break
		}
	}
	return p.strRest(start, i)
}

// strRest goes on with the string that began at start from i, where str
// stopped: at a byte other than the closing quote, or near the end.
func (p *parser) strRest(start, i int) (raw []byte, flags int, err error) {
	b := p.b
	high := uint64(swarHigh) // stop at bytes ≥ 0x80 until strHigh is set
	for {
		// Plain bytes 8 at a time, while 8 are left.
		for len(b)-i >= 8 {
			if m := special(binary.LittleEndian.Uint64(b[i:]), high); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch strClass[b[i]] {
		case 0:
			i++
		case 2:
			p.i = i + 1
			return b[start:i], flags, nil
		case 3:
			flags |= strEscaped
			if i+1 >= len(b) {
				p.i = i
				return nil, 0, p.fail("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || hex4(b[i+2:i+6]) < 0 {
					p.i = i
					return nil, 0, p.fail("bad \\u escape")
				}
				i += 6
			default:
				p.i = i
				return nil, 0, p.fail("bad escape")
			}
		case 4:
			flags |= strHigh
			high = 0
			i++
		default:
			p.i = i
			return nil, 0, p.fail("control character in string")
		}
	}
	p.i = len(b)
	return nil, 0, p.fail("unterminated string")
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		v, ok := hexdigit.Value(c)
		if !ok {
			return -1
		}
		r = r*16 + rune(v)
	}
	return r
}

// number reads a JSON number and returns its literal.
func (p *parser) number() ([]byte, error) {
	b, start := p.b, p.i
	i := p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i++
		for len(b)-i >= 8 && allDigits(binary.LittleEndian.Uint64(b[i:])) {
			i += 8 // a timestamp ("created") is 10 digits
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		p.i = i
		return nil, p.fail("bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return nil, p.fail("bad number fraction")
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return nil, p.fail("bad number exponent")
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	p.i = i
	return b[start:i], nil
}

// allDigits reports whether all 8 bytes of w are '0'..'9': each byte's
// high nibble is 3, and adding 6 keeps it 3 (so the low nibble is ≤ 9).
func allDigits(w uint64) bool {
	return w&0xF0F0F0F0F0F0F0F0 == swarOnes*0x30 && (w+swarOnes*6)&0xF0F0F0F0F0F0F0F0 == swarOnes*0x30
}

func (p *parser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.fail("bad literal")
	}
	p.i += len(word)
	return nil
}

// skip reads and discards one value of any kind.
func (p *parser) skip(depth int) error {
	switch c := p.peek(); {
	case c == '"':
		// A plain ASCII string, most of what is skipped, is read here
		// rather than by a call to str.
		b := p.b
		for i := p.i + 1; len(b)-i >= 8; i += 8 {
			if m := specialASCII(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				if i += bits.TrailingZeros64(m) >> 3; b[i] == '"' {
					p.i = i + 1
					return nil
				}
				break
			}
		}
		_, _, err := p.str()
		return err
	case c == '{':
		if depth >= maxFastDepth {
			return errFallback
		}
		_, more, err := p.objectStart()
		for more {
			if err = p.skip(depth + 1); err != nil {
				return err
			}
			_, more, err = p.member()
		}
		return err
	case c == '[':
		if depth >= maxFastDepth {
			return errFallback
		}
		more, err := p.arrayStart()
		for more {
			p.wsIf()
			if err = p.skip(depth + 1); err != nil {
				return err
			}
			more, err = p.after(']')
		}
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		_, err := p.number()
		return err
	default:
		return p.fail("expected value")
	}
}

// An object is read as
//
//	key, more, err := p.objectStart()
//	for more {
//		... consume the value at p.i ...
//		key, more, err = p.member()
//	}
//
// with plain calls rather than a callback per member, so the member code
// of each caller is compiled in place, and one call per member; an array
// is read with arrayStart and after, with p.wsIf() before each element.

// objectStart consumes the '{' at p.i and reads the first member's key
// (see member).
func (p *parser) objectStart() (key []byte, more bool, err error) {
	if p.peek() != '{' {
		return nil, false, p.fail("expected object")
	}
	p.i++
	return p.key(true)
}

// member reads what follows a member's value: a ',' and the next key and
// its ':' (more, p.i at the value), or the closing '}' (!more).
func (p *parser) member() (key []byte, more bool, err error) { return p.key(false) }

// key reads the next member of an object, after its '{' (first) or after
// a value: the closing '}', or (after a ',' unless first) a key and its
// ':', leaving p.i at the value. Keys with escapes go to the reference
// decoder, since comparing them raw could be wrong. The common key (plain,
// followed by ':') is read here with local indices; others by keySlow.
func (p *parser) key(first bool) (key []byte, more bool, err error) {
	b, i := p.b, p.i
	if i < len(b) && b[i] <= ' ' {
		p.ws()
		i = p.i
	}
	if i >= len(b) {
		return nil, false, p.fail("expected ',' or '}'")
	}
	switch c := b[i]; {
	case c == '}':
		p.i = i + 1
		return nil, false, nil
	case !first:
		if c != ',' {
			return nil, false, p.fail("expected ',' or '}'")
		}
		i++
		if i < len(b) && b[i] <= ' ' {
			p.i = i
			p.ws()
			i = p.i
		}
	}
	if i < len(b) && b[i] == '"' {
		for j := i + 1; len(b)-j >= 8; j += 8 {
			m := specialASCII(binary.LittleEndian.Uint64(b[j:]))
			if m == 0 {
				continue
			}
			j += bits.TrailingZeros64(m) >> 3
			if b[j] == '"' && j+1 < len(b) && b[j+1] == ':' {
				p.i = j + 2
				p.wsIf()
				return b[i+1 : j], true, nil
			}
			break
		}
	}
	p.i = i
	key, err = p.keySlow()
	return key, err == nil, err
}

// arrayStart consumes the '[' at p.i and reports whether an element
// follows (false for "[]").
func (p *parser) arrayStart() (more bool, err error) {
	if p.peek() != '[' {
		return false, p.fail("expected array")
	}
	p.i++
	return !p.next(']'), nil
}

func (p *parser) keySlow() ([]byte, error) {
	key, flags, err := p.str()
	if err != nil {
		return nil, err
	}
	if flags&strEscaped != 0 {
		return nil, errFallback
	}
	if !p.next(':') {
		return nil, p.fail("expected ':'")
	}
	p.wsIf()
	return key, nil
}

// rawStr is a string value seen by the fast path, decoded only if needed:
// its place in the event's bytes, so the decoder's state stays small (it
// is zeroed per event).
type rawStr struct {
	off, n int32
	flags  uint8
	ok     bool // the value was a string
}

// bytes is the string's raw contents within data, the event's bytes.
func (s rawStr) bytes(data []byte) []byte { return data[s.off : s.off+s.n] }

// strOrSkip reads a string value, or skips a value of another kind and
// reports it as not a string.
func (p *parser) strOrSkip(depth int) (rawStr, error) {
	if p.peek() != '"' {
		return rawStr{}, p.skip(depth)
	}
	start := p.i + 1
	b, f, err := p.str()
	return rawStr{int32(start), int32(len(b)), uint8(f), true}, err
}

// numOrSkip reads a number or string literal for codes and counts, which
// sit two levels down (an object inside the chunk).
func (p *parser) numOrSkip() (lit []byte, isNum bool, err error) {
	if c := p.peek(); c == '-' || ('0' <= c && c <= '9') {
		lit, err = p.number()
		return lit, true, err
	}
	return nil, false, p.skip(2)
}

// tokenCount is the count a literal stands for, or -1: only plain integer
func finishString(data []byte, s rawStr) string {
	if s.flags == 0 {
		switch string(s.bytes(data)) {
		case "stop":
			return "stop"
		case "length":
			return "length"
		case "tool_calls":
			return "tool_calls"
		case "content_filter":
			return "content_filter"
		case "eos_token":
			return "eos_token"
		case "stop_sequence":
			return "stop_sequence"
		case "abort":
			return "abort"
		}
	}
	return decodeStr(data, s)
}

func decodeStr(data []byte, s rawStr) string {
	if s.flags == 0 {
		return string(s.bytes(data))
	}
	return string(appendUnquoted(nil, s.bytes(data)))
}

func appendStr(dst, data []byte, s rawStr) []byte {
	if s.flags == 0 {
		return append(dst, s.bytes(data)...)
	}
	return appendUnquoted(dst, s.bytes(data))
}

// appendUnquoted decodes the contents of a JSON string already validated
// by parser.str, exactly as encoding/json does: escapes resolved, invalid
// UTF-8 and lone surrogates replaced by U+FFFD.
func appendUnquoted(dst, raw []byte) []byte {
	for r := 0; r < len(raw); {
		c := raw[r]
		switch {
		case c == '\\':
			switch e := raw[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(raw[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+1 < len(raw) && raw[r] == '\\' && raw[r+1] == 'u' {
						rr1 = hex4(raw[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			r += size
			dst = utf8.AppendRune(dst, rr)
		}
	}
	return dst
}
