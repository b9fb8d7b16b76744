package openai

import (
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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

// next skips white space, then consumes c if it is there.
func (p *parser) next(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
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

// str reads the string at p.i and returns its raw contents (between the
// quotes) and flags saying whether decoding is more than a copy.
func (p *parser) str() (raw []byte, flags int, err error) {
	if p.peek() != '"' {
		return nil, 0, p.fail("expected string")
	}
	start := p.i + 1
	b := p.b
	for i := start; i < len(b); {
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
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
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
		_, _, err := p.str()
		return err
	case c == '{':
		if depth >= maxFastDepth {
			return errFallback
		}
		p.i++
		if p.next('}') {
			return nil
		}
		for {
			p.ws()
			if _, _, err := p.str(); err != nil {
				return err
			}
			if !p.next(':') {
				return p.fail("expected ':'")
			}
			p.ws()
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			if p.next(',') {
				continue
			}
			if p.next('}') {
				return nil
			}
			return p.fail("expected ',' or '}'")
		}
	case c == '[':
		if depth >= maxFastDepth {
			return errFallback
		}
		p.i++
		if p.next(']') {
			return nil
		}
		for {
			p.ws()
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			if p.next(',') {
				continue
			}
			if p.next(']') {
				return nil
			}
			return p.fail("expected ',' or ']'")
		}
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

// object calls member for each key of the object at p.i, with p.i at the
// value; member must consume the value. Keys with escapes go to the
// reference decoder, since comparing them raw could be wrong.
//
// member is a method value on a stack object in the callers below; they
// are written so the closure does not escape (checked by the benchmark's
// allocs/token).
func (p *parser) object(member func(key []byte) error) error {
	if p.peek() != '{' {
		return p.fail("expected object")
	}
	p.i++
	if p.next('}') {
		return nil
	}
	for {
		p.ws()
		key, flags, err := p.str()
		if err != nil {
			return err
		}
		if flags&strEscaped != 0 {
			return errFallback
		}
		if !p.next(':') {
			return p.fail("expected ':'")
		}
		p.ws()
		if err := member(key); err != nil {
			return err
		}
		if p.next(',') {
			continue
		}
		if p.next('}') {
			return nil
		}
		return p.fail("expected ',' or '}'")
	}
}

// rawStr is a string value seen by the fast path, decoded only if needed.
type rawStr struct {
	b     []byte
	flags int
	ok    bool // the value was a string
}

// strOrSkip reads a string value, or skips a value of another kind and
// reports it as not a string.
func (p *parser) strOrSkip(depth int) (rawStr, error) {
	if p.peek() != '"' {
		return rawStr{}, p.skip(depth)
	}
	b, f, err := p.str()
	return rawStr{b, f, true}, err
}

// numOrSkip reads a number or string literal for codes and counts.
func (p *parser) numOrSkip(depth int) (lit []byte, isNum bool, err error) {
	if c := p.peek(); c == '-' || ('0' <= c && c <= '9') {
		lit, err = p.number()
		return lit, true, err
	}
	return nil, false, p.skip(depth)
}

// tokenCount is the count a literal stands for, or -1: only plain integer
func finishString(s rawStr) string {
	if s.flags == 0 {
		switch string(s.b) {
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
	return decodeStr(s)
}

func decodeStr(s rawStr) string {
	if s.flags == 0 {
		return string(s.b)
	}
	return string(appendUnquoted(nil, s.b))
}

func appendStr(dst []byte, s rawStr) []byte {
	if s.flags == 0 {
		return append(dst, s.b...)
	}
	return appendUnquoted(dst, s.b)
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
