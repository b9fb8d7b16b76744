package openai

import "bytes"

// shape is the last event of a stream that the fast path decoded with a
// slot: its bytes, and its decoding. The events of one stream
// mostly differ only in the token's text (vLLM, SGLang, llama.cpp without
// timings: the same id, model, created and finish_reason on every chunk),
// and an event whose bytes equal the shape's outside the slot, with a valid
// JSON string in it, is valid JSON that decodes as the shape's did but for
// that string: it is decoded by comparing bytes and scanning one string,
// not by parsing the whole event (pprof: the decoder was a third of the
// client's CPU on 128-token streams). Anything else is decoded in full and
// becomes the shape if it has a slot.
type shape struct {
	b  []byte // the shape event's bytes; its slot is b[lo:hi]
	lo int    // the slot's first byte, after the opening quote
	hi int    // the closing quote
	ev event  // its decoding (answer and text aside: they come from the slot)
	ok bool
}

// maxShapeBytes bounds the event a shape keeps: every stream in flight
// holds its shape's bytes, and a token event is a few hundred.
const maxShapeBytes = 1 << 10

// decode decodes data into ev (appending its text to text when keepText)
// as decodeEvent does, through the shape when data has it.
func (sh *shape) decode(data []byte, ev *event, text []byte, keepText bool) ([]byte, error) {
	if sh.ok {
		if out, ok := sh.match(data, ev, text, keepText); ok {
			return out, nil
		}
	}
	out, sl, err := decodeEventSlot(data, ev, text, keepText)
	sh.ok = false
	if err == nil && sl.ok && len(data) <= maxShapeBytes {
		sh.b = append(sh.b[:0], data...)
		sh.lo = int(sl.s.off)
		sh.hi = sh.lo + int(sl.s.n)
		sh.ev, sh.ok = *ev, true
	}
	return out, err
}

// match decodes data through the shape; false when data does not have it.
func (sh *shape) match(data []byte, ev *event, text []byte, keepText bool) ([]byte, bool) {
	suffix := sh.b[sh.hi:] // from the closing quote
	if len(data) < sh.lo+len(suffix) || !bytes.Equal(data[:sh.lo], sh.b[:sh.lo]) {
		return text, false
	}
	p := parser{b: data, i: sh.lo - 1} // the opening quote
	raw, flags, err := p.str()
	if err != nil || !bytes.Equal(data[p.i-1:], suffix) {
		return text, false
	}
	*ev = sh.ev
	s := rawStr{off: int32(sh.lo), n: int32(len(raw)), flags: uint8(flags), ok: true}
	ev.answer = len(raw) > 0
	if keepText {
		text = appendStr(text, data, s)
	}
	return text, true
}
