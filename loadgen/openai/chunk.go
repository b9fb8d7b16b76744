package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// event is what one stream event (or one whole non-streamed response)
// says, reduced to what the timing model needs. Token counts are -1 when
// absent.
//
// The rules, shared by the fast and the reference decoder (and checked
// against each other by FuzzDecodeChunk): the top level must be a JSON
// object; a repeated key counts only by its last value, as in a map;
// "choices" counts only if it is an array, and only its object elements;
// answer text is a choice's delta.content, message.content and text (in
// that order), strings only; reasoning is delta/message "reasoning" or
// "reasoning_content"; a non-empty tool_calls array also bears answer
// tokens; token counts count only as plain non-negative integer literals
// of at most 15 digits; "error" that is present and not null is an error.
type event struct {
	choices   int
	answer    bool   // non-empty answer text or tool calls in some choice
	reasoning bool   // non-empty reasoning text in some choice
	finish    string // the last non-empty finish_reason among the choices

	usage            bool // "usage" is an object
	promptTokens     int
	completionTokens int
	predictedTokens  int // llama.cpp timings.predicted_n: cumulative

	isError    bool
	errMessage string
	errCode    string
}

func (ev *event) reset() {
	*ev = event{promptTokens: -1, completionTokens: -1, predictedTokens: -1}
}

// maxFastDepth is the nesting the fast path handles; deeper input goes to
// the reference decoder, whose own limit is far higher.
const maxFastDepth = 64

// errFallback means the fast path met input it does not handle (escaped
// keys, deep nesting); the reference decoder decides.
var errFallback = errors.New("fast path: unsupported input")

// decodeEvent decodes one event's JSON into ev and, when keepText, appends
// its answer text to text. The fast path handles everything servers send;
// whatever it rejects is decoded again by encoding/json, whose verdict
// stands, so a fast-path mistake can cost speed but not a false error.
func decodeEvent(data []byte, ev *event, text []byte, keepText bool) ([]byte, error) {
	start := len(text)
	out, err := decodeFast(data, ev, text, keepText)
	if err == nil {
		return out, nil
	}
	return decodeSlow(data, ev, text[:start], keepText)
}

// ---- fast path ----------------------------------------------------------

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
// literals of at most 15 digits count (no sign, fraction or exponent).
func tokenCount(lit string) int {
	if len(lit) == 0 || len(lit) > 15 {
		return -1
	}
	n := 0
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// deltaState collects one delta or message object.
type deltaState struct {
	content          rawStr
	reasoning        bool
	reasoningContent bool
	toolCalls        bool
}

type choiceState struct {
	delta, message deltaState
	text           rawStr
	finish         rawStr
}

// fastDecoder holds the state of one decodeFast call; its methods are the
// member callbacks, so no closure is allocated per object.
type fastDecoder struct {
	p        parser
	ev       *event
	text     []byte
	keepText bool

	choicesStart int         // 1 + len(text) when the first "choices" began
	cs           choiceState // the choice being read (choices do not nest)
	inMessage    bool        // reading cs.message rather than cs.delta

	errVal  int // 0 absent or null, 1 string, 2 object, 3 other
	errStr  rawStr
	errMsg  rawStr
	errCode []byte // literal, or raw string contents
	errCodeStr,
	errStatusStr bool
	errStatus []byte
}

func decodeFast(data []byte, ev *event, text []byte, keepText bool) ([]byte, error) {
	ev.reset()
	d := fastDecoder{p: parser{b: data}, ev: ev, text: text, keepText: keepText}
	d.p.ws()
	if d.p.peek() != '{' {
		return text, d.p.fail("chunk is not a JSON object")
	}
	if err := d.p.object(d.top); err != nil {
		return text, err
	}
	d.p.ws()
	if d.p.i != len(d.p.b) {
		return text, d.p.fail("data after JSON value")
	}
	if d.errVal != 0 {
		ev.isError = true
		switch d.errVal {
		case 1:
			ev.errMessage = decodeStr(d.errStr)
		case 2:
			if d.errMsg.ok {
				ev.errMessage = decodeStr(d.errMsg)
			}
			switch {
			case d.errCode != nil:
				ev.errCode = codeString(d.errCode, d.errCodeStr)
			case d.errStatus != nil:
				ev.errCode = codeString(d.errStatus, d.errStatusStr)
			}
		}
	}
	return d.text, nil
}

func codeString(raw []byte, isStr bool) string {
	if isStr {
		return string(appendUnquoted(nil, raw))
	}
	return string(raw)
}

func (d *fastDecoder) top(key []byte) error {
	p, ev := &d.p, d.ev
	switch string(key) {
	case "choices":
		ev.choices, ev.answer, ev.reasoning, ev.finish = 0, false, false, ""
		if d.keepText {
			if d.choicesStart == 0 {
				d.choicesStart = len(d.text) + 1 // +1: 0 means unset
			}
			d.text = d.text[:d.choicesStart-1]
		}
		if p.peek() != '[' {
			return p.skip(1)
		}
		p.i++
		if p.next(']') {
			return nil
		}
		for {
			p.ws()
			if p.peek() == '{' {
				if err := d.choice(); err != nil {
					return err
				}
			} else if err := p.skip(2); err != nil {
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
	case "usage":
		ev.usage, ev.promptTokens, ev.completionTokens = false, -1, -1
		if p.peek() != '{' {
			return p.skip(1)
		}
		ev.usage = true
		return p.object(d.usage)
	case "timings":
		ev.predictedTokens = -1
		if p.peek() != '{' {
			return p.skip(1)
		}
		return p.object(d.timings)
	case "error":
		d.errVal, d.errStr, d.errMsg, d.errCode, d.errStatus = 0, rawStr{}, rawStr{}, nil, nil
		switch p.peek() {
		case 'n':
			return p.skip(1) // "error": null is no error
		case '"':
			d.errVal = 1
			var err error
			d.errStr, err = p.strOrSkip(1)
			return err
		case '{':
			d.errVal = 2
			return p.object(d.errorMember)
		default:
			d.errVal = 3
			return p.skip(1)
		}
	default:
		return p.skip(1)
	}
}

func (d *fastDecoder) choice() error {
	d.cs = choiceState{}
	if err := d.p.object(d.choiceMember); err != nil {
		return err
	}
	ev, cs := d.ev, &d.cs
	ev.choices++
	if len(cs.delta.content.b) > 0 || len(cs.message.content.b) > 0 || len(cs.text.b) > 0 ||
		cs.delta.toolCalls || cs.message.toolCalls {
		ev.answer = true
	}
	if cs.delta.reasoning || cs.delta.reasoningContent || cs.message.reasoning || cs.message.reasoningContent {
		ev.reasoning = true
	}
	if len(cs.finish.b) > 0 {
		ev.finish = finishString(cs.finish)
	}
	if d.keepText {
		d.text = appendStr(d.text, cs.delta.content)
		d.text = appendStr(d.text, cs.message.content)
		d.text = appendStr(d.text, cs.text)
	}
	return nil
}

func (d *fastDecoder) choiceMember(key []byte) error {
	p, cs := &d.p, &d.cs
	var err error
	switch string(key) {
	case "delta":
		return d.deltaValue(false)
	case "message":
		return d.deltaValue(true)
	case "text":
		cs.text, err = p.strOrSkip(3)
	case "finish_reason":
		cs.finish, err = p.strOrSkip(3)
	default:
		err = p.skip(3)
	}
	return err
}

func (d *fastDecoder) deltaValue(message bool) error {
	d.inMessage = message
	*d.delta() = deltaState{}
	if d.p.peek() != '{' {
		return d.p.skip(3)
	}
	return d.p.object(d.deltaMember)
}

func (d *fastDecoder) delta() *deltaState {
	if d.inMessage {
		return &d.cs.message
	}
	return &d.cs.delta
}

func (d *fastDecoder) deltaMember(key []byte) error {
	p, ds := &d.p, d.delta()
	var err error
	switch string(key) {
	case "content":
		ds.content, err = p.strOrSkip(4)
	case "reasoning":
		var s rawStr
		s, err = p.strOrSkip(4)
		ds.reasoning = len(s.b) > 0
	case "reasoning_content":
		var s rawStr
		s, err = p.strOrSkip(4)
		ds.reasoningContent = len(s.b) > 0
	case "tool_calls":
		ds.toolCalls = false
		if p.peek() == '[' {
			at := p.i
			if err = p.skip(4); err == nil {
				q := parser{b: p.b, i: at + 1}
				ds.toolCalls = !q.next(']')
			}
		} else {
			err = p.skip(4)
		}
	default:
		err = p.skip(4)
	}
	return err
}

func (d *fastDecoder) usage(key []byte) error {
	p, ev := &d.p, d.ev
	switch string(key) {
	case "prompt_tokens":
		lit, isNum, err := p.numOrSkip(2)
		ev.promptTokens = -1
		if isNum {
			ev.promptTokens = tokenCount(string(lit))
		}
		return err
	case "completion_tokens":
		lit, isNum, err := p.numOrSkip(2)
		ev.completionTokens = -1
		if isNum {
			ev.completionTokens = tokenCount(string(lit))
		}
		return err
	default:
		return p.skip(2)
	}
}

func (d *fastDecoder) timings(key []byte) error {
	p, ev := &d.p, d.ev
	if string(key) != "predicted_n" {
		return p.skip(2)
	}
	lit, isNum, err := p.numOrSkip(2)
	ev.predictedTokens = -1
	if isNum {
		ev.predictedTokens = tokenCount(string(lit))
	}
	return err
}

func (d *fastDecoder) errorMember(key []byte) error {
	p := &d.p
	var err error
	switch string(key) {
	case "message":
		d.errMsg, err = p.strOrSkip(2)
	case "code":
		d.errCode, d.errCodeStr, err = d.codeValue()
	case "http_status_code":
		d.errStatus, d.errStatusStr, err = d.codeValue()
	default:
		err = p.skip(2)
	}
	return err
}

// codeValue reads an error code: a number literal or a string; anything
// else counts as absent.
func (d *fastDecoder) codeValue() (raw []byte, isStr bool, err error) {
	p := &d.p
	if p.peek() == '"' {
		s, err := p.strOrSkip(2)
		return s.b[:len(s.b):len(s.b)], true, err
	}
	lit, isNum, err := p.numOrSkip(2)
	if !isNum {
		return nil, false, err
	}
	return lit, false, err
}

// finishString avoids allocating for the finish reasons servers send.
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

// ---- reference path -------------------------------------------------------

// decodeSlow applies the rules on event through encoding/json. It is the
// fallback for input the fast path declines, the judge of input it
// rejects, and the oracle the fuzz tests compare the fast path with.
func decodeSlow(data []byte, ev *event, text []byte, keepText bool) ([]byte, error) {
	ev.reset()
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return text, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return text, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return text, errors.New("chunk is not a JSON object")
	}
	if choices, ok := top["choices"].([]any); ok {
		for _, c := range choices {
			choice, ok := c.(map[string]any)
			if !ok {
				continue
			}
			ev.choices++
			delta, _ := choice["delta"].(map[string]any)
			message, _ := choice["message"].(map[string]any)
			textVal, _ := choice["text"].(string)
			dc, _ := delta["content"].(string)
			mc, _ := message["content"].(string)
			if dc != "" || mc != "" || textVal != "" || nonEmptyArray(delta["tool_calls"]) || nonEmptyArray(message["tool_calls"]) {
				ev.answer = true
			}
			if nonEmptyString(delta["reasoning"]) || nonEmptyString(delta["reasoning_content"]) ||
				nonEmptyString(message["reasoning"]) || nonEmptyString(message["reasoning_content"]) {
				ev.reasoning = true
			}
			if f, _ := choice["finish_reason"].(string); f != "" {
				ev.finish = f
			}
			if keepText {
				text = append(text, dc...)
				text = append(text, mc...)
				text = append(text, textVal...)
			}
		}
	}
	if usage, ok := top["usage"].(map[string]any); ok {
		ev.usage = true
		ev.promptTokens = jsonCount(usage["prompt_tokens"])
		ev.completionTokens = jsonCount(usage["completion_tokens"])
	}
	if timings, ok := top["timings"].(map[string]any); ok {
		ev.predictedTokens = jsonCount(timings["predicted_n"])
	}
	if e, present := top["error"]; present && e != nil {
		ev.isError = true
		switch e := e.(type) {
		case string:
			ev.errMessage = e
		case map[string]any:
			ev.errMessage, _ = e["message"].(string)
			if c := jsonCode(e["code"]); c != nil {
				ev.errCode = *c
			} else if c := jsonCode(e["http_status_code"]); c != nil {
				ev.errCode = *c
			}
		}
	}
	return text, nil
}

func nonEmptyString(v any) bool { s, _ := v.(string); return s != "" }
func nonEmptyArray(v any) bool  { a, _ := v.([]any); return len(a) > 0 }

func jsonCount(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	return tokenCount(string(n))
}

func jsonCode(v any) *string {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		return &s
	case string:
		return &v
	}
	return nil
}
