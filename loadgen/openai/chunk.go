package openai

import (
	"errors"
	"math"
	"strconv"
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
	// llama.cpp timings.prompt_ms and predicted_ms: the server's prefill
	// and generation times so far (-1: absent).
	promptMs, predictedMs float64

	isError    bool
	errMessage string
	errCode    string
}

func (ev *event) reset() {
	*ev = event{promptTokens: -1, completionTokens: -1, predictedTokens: -1, promptMs: -1, predictedMs: -1}
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
	out, _, err := decodeEventSlot(data, ev, text, keepText)
	return out, err
}

// decodeEventSlot is decodeEvent, and the event's slot when the fast path
// decoded it.
func decodeEventSlot(data []byte, ev *event, text []byte, keepText bool) ([]byte, slot, error) {
	start := len(text)
	out, sl, err := decodeFastSlot(data, ev, text, keepText)
	if err == nil {
		return out, sl, nil
	}
	out, err = decodeSlow(data, ev, text[:start], keepText)
	return out, slot{}, err
}

// literals of at most 15 digits count (no sign, fraction or exponent).
// timingMs reads a timing in milliseconds: a non-negative number, else -1.
func timingMs(lit string) float64 {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) {
		return -1
	}
	return f
}

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

// fastDecoder holds the state of one decodeFast call; its methods read
// the members of each kind of object (see parser.member).
type fastDecoder struct {
	p        parser
	ev       *event
	text     []byte
	keepText bool

	choicesStart int         // 1 + len(text) when the first "choices" began
	cs           choiceState // the choice being read (choices do not nest)
	slot         slot        // the one choice's answer string, when it is the only answer source (shape)
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
	out, _, err := decodeFastSlot(data, ev, text, keepText)
	return out, err
}

// slot is where an event's answer string's contents sit in its bytes,
// when the fast path decoded it and that string is all the decoding takes
// from the choices that can differ between two events of a stream (see
// shape); ok says there is one.
type slot struct {
	s  rawStr
	ok bool
}

// decodeFastSlot is decodeFast, and the event's slot.
func decodeFastSlot(data []byte, ev *event, text []byte, keepText bool) ([]byte, slot, error) {
	ev.reset()
	if len(data) > math.MaxInt32 {
		return text, slot{}, errFallback // rawStr holds 32-bit offsets
	}
	d := fastDecoder{p: parser{b: data}, ev: ev, text: text, keepText: keepText}
	d.p.ws()
	if d.p.peek() != '{' {
		return text, slot{}, d.p.fail("chunk is not a JSON object")
	}
	key, more, err := d.p.objectStart()
	for more {
		if err = d.top(key); err != nil {
			break
		}
		key, more, err = d.p.member()
	}
	if err != nil {
		return text, slot{}, err
	}
	d.p.ws()
	if d.p.i != len(d.p.b) {
		return text, slot{}, d.p.fail("data after JSON value")
	}
	if d.errVal != 0 {
		d.slot = slot{}
		ev.isError = true
		switch d.errVal {
		case 1:
			ev.errMessage = decodeStr(data, d.errStr)
		case 2:
			if d.errMsg.ok {
				ev.errMessage = decodeStr(data, d.errMsg)
			}
			switch {
			case d.errCode != nil:
				ev.errCode = codeString(d.errCode, d.errCodeStr)
			case d.errStatus != nil:
				ev.errCode = codeString(d.errStatus, d.errStatusStr)
			}
		}
	}
	return d.text, d.slot, nil
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
		d.slot = slot{}
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
		more, err := p.arrayStart()
		for more && err == nil {
			p.wsIf()
			if p.peek() == '{' {
				err = d.choice()
			} else {
				err = p.skip(2)
			}
			if err == nil {
				more, err = p.after(']')
			}
		}
		return err
	case "usage":
		ev.usage, ev.promptTokens, ev.completionTokens = false, -1, -1
		if p.peek() != '{' {
			return p.skip(1)
		}
		ev.usage = true
		key, more, err := p.objectStart()
		for more {
			if err = d.usage(key); err != nil {
				break
			}
			key, more, err = p.member()
		}
		return err
	case "timings":
		ev.predictedTokens, ev.promptMs, ev.predictedMs = -1, -1, -1
		if p.peek() != '{' {
			return p.skip(1)
		}
		key, more, err := p.objectStart()
		for more {
			if err = d.timings(key); err != nil {
				break
			}
			key, more, err = p.member()
		}
		return err
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
			key, more, err := p.objectStart()
			for more {
				if err = d.errorMember(key); err != nil {
					break
				}
				key, more, err = p.member()
			}
			return err
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
	p := &d.p
	key, more, err := p.objectStart()
	for more {
		if err = d.choiceMember(key); err != nil {
			break
		}
		key, more, err = p.member()
	}
	if err != nil {
		return err
	}
	ev, cs := d.ev, &d.cs
	ev.choices++
	if cs.delta.content.n > 0 || cs.message.content.n > 0 || cs.text.n > 0 ||
		cs.delta.toolCalls || cs.message.toolCalls {
		ev.answer = true
	}
	// The shape's slot: the first choice's one answer string (delta
	// content, or a completion's text), when nothing else answers.
	d.slot = slot{}
	if ev.choices == 1 && !cs.delta.toolCalls && !cs.message.toolCalls && !cs.message.content.ok {
		switch {
		case cs.delta.content.ok && !cs.text.ok:
			d.slot = slot{cs.delta.content, true}
		case cs.text.ok && !cs.delta.content.ok:
			d.slot = slot{cs.text, true}
		}
	}
	if cs.delta.reasoning || cs.delta.reasoningContent || cs.message.reasoning || cs.message.reasoningContent {
		ev.reasoning = true
	}
	if cs.finish.n > 0 {
		ev.finish = finishString(d.p.b, cs.finish)
	}
	if d.keepText {
		data := d.p.b
		d.text = appendStr(d.text, data, cs.delta.content)
		d.text = appendStr(d.text, data, cs.message.content)
		d.text = appendStr(d.text, data, cs.text)
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
	p := &d.p
	key, more, err := p.objectStart()
	for more {
		if err = d.deltaMember(key); err != nil {
			break
		}
		key, more, err = p.member()
	}
	return err
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
		ds.reasoning = s.n > 0
	case "reasoning_content":
		var s rawStr
		s, err = p.strOrSkip(4)
		ds.reasoningContent = s.n > 0
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
		lit, isNum, err := p.numOrSkip()
		ev.promptTokens = -1
		if isNum {
			ev.promptTokens = tokenCount(string(lit))
		}
		return err
	case "completion_tokens":
		lit, isNum, err := p.numOrSkip()
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
	switch string(key) {
	case "prompt_ms", "predicted_ms":
		lit, isNum, err := p.numOrSkip()
		ms := -1.0
		if isNum {
			ms = timingMs(string(lit))
		}
		if string(key) == "prompt_ms" {
			ev.promptMs = ms
		} else {
			ev.predictedMs = ms
		}
		return err
	case "predicted_n":
	default:
		return p.skip(2)
	}
	lit, isNum, err := p.numOrSkip()
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
		b := s.bytes(p.b)
		return b[:len(b):len(b)], true, err
	}
	lit, isNum, err := p.numOrSkip()
	if !isNum {
		return nil, false, err
	}
	return lit, false, err
}

// finishString avoids allocating for the finish reasons servers send.
