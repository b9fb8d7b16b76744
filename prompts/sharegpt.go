package prompts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// shareGPTRoles maps ShareGPT speakers to chat roles.
var shareGPTRoles = map[string]string{
	"human": "user", "user": "user",
	"gpt": "assistant", "chatgpt": "assistant", "bing": "assistant", "bard": "assistant",
	"assistant": "assistant", "model": "assistant",
	"system": "system",
}

type shareGPTEntry struct {
	Conversations *[]struct {
		From  *string `json:"from"`
		Value *string `json:"value"`
	} `json:"conversations"`
}

// offsetError is a parse error known by byte offset; locate turns it into
// an *Error with a line number by reading the file again.
type offsetError struct {
	off   int64
	field string
	err   error
	// atNext: the error is at the first non-space byte from off (the
	// decoder's syntax offsets stop before whitespace it skipped).
	atNext bool
}

func (e *offsetError) Error() string { return fmt.Sprintf("offset %d: %s: %v", e.off, e.field, e.err) }

// parseShareGPT reads ShareGPT conversations: a JSON array of
// {"id": ..., "conversations": [{"from": "human"|"gpt"|..., "value": ...}]}
// (or the same objects one after another, as JSONL). It decodes one entry at
// a time so a file of hundreds of MB is never held whole. Entries without
// a conversations list are skipped (as vLLM's loader does); wrong types are
// errors. limit > 0 stops after that many entries.
func parseShareGPT(name string, r io.Reader, limit int) (convs []conv, skipped int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	dec := json.NewDecoder(br)
	array := false
	b, lead, perr := peekNonSpace(br)
	// The decoder counts offsets from after the leading space and byte
	// order mark it never saw.
	defer func() {
		var oe *offsetError
		if errors.As(err, &oe) {
			oe.off += lead
		}
	}()
	if perr == nil && b == '[' {
		array = true
		if _, terr := dec.Token(); terr != nil {
			return nil, 0, &offsetError{0, "", fmt.Errorf("not JSON: %w", terr), true}
		}
	} else if perr != nil {
		return nil, 0, errAt(name, 0, "", "no conversations in file")
	}
	for i := 0; ; i++ {
		if array && !dec.More() {
			if _, terr := dec.Token(); terr != nil {
				return nil, 0, syntaxAt(dec, terr, "")
			}
			break
		}
		var raw json.RawMessage
		if derr := dec.Decode(&raw); derr != nil {
			if derr == io.EOF && !array {
				break
			}
			return nil, 0, syntaxAt(dec, derr, "")
		}
		start := dec.InputOffset() - int64(len(raw))
		field := fmt.Sprintf("[%d]", i)
		if raw[0] != '{' {
			return nil, 0, &offsetError{start, field, fmt.Errorf("want an object, got %s", clip(raw)), false}
		}
		var e shareGPTEntry
		if uerr := json.Unmarshal(raw, &e); uerr != nil {
			var te *json.UnmarshalTypeError
			if errors.As(uerr, &te) {
				if te.Field != "" {
					field += "." + te.Field
				}
				return nil, 0, &offsetError{start, field, fmt.Errorf("want %s, got %s", typeName(te.Type), te.Value), false}
			}
			return nil, 0, &offsetError{start, field, uerr, false}
		}
		if e.Conversations == nil || len(*e.Conversations) == 0 {
			skipped++
			continue
		}
		c := conv{messages: make([]Message, 0, len(*e.Conversations))}
		for j, t := range *e.Conversations {
			f := fmt.Sprintf("%s.conversations[%d]", field, j)
			if t.From == nil {
				return nil, 0, &offsetError{start, f + ".from", ErrMissing, false}
			}
			if t.Value == nil {
				return nil, 0, &offsetError{start, f + ".value", ErrMissing, false}
			}
			role, ok := shareGPTRoles[*t.From]
			if !ok {
				return nil, 0, &offsetError{start, f + ".from", fmt.Errorf("unknown speaker %q (want human, gpt or system)", *t.From), false}
			}
			c.messages = append(c.messages, Message{Role: role, Content: *t.Value})
		}
		convs = append(convs, c)
		if limit > 0 && len(convs) >= limit {
			break
		}
	}
	if len(convs) == 0 {
		return nil, skipped, errAt(name, 0, "", "no conversations in file")
	}
	return convs, skipped, nil
}

// peekNonSpace skips leading white space and byte order marks, returning
// the next byte (unread) and how many bytes were skipped.
func peekNonSpace(br *bufio.Reader) (byte, int64, error) {
	var n int64
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, n, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			br.Discard(1)
			n++
		case 0xEF: // UTF-8 byte order mark
			if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
				br.Discard(3)
				n += 3
				continue
			}
			return b[0], n, nil
		default:
			return b[0], n, nil
		}
	}
}

// syntaxAt turns a decoder error into an offsetError.
func syntaxAt(dec *json.Decoder, err error, field string) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &offsetError{se.Offset, field, fmt.Errorf("not JSON: %w", err), true}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &offsetError{dec.InputOffset(), field, errors.New("not JSON: unexpected end of file"), false}
	}
	return &offsetError{dec.InputOffset(), field, fmt.Errorf("not JSON: %w", err), true}
}

// lineAt is the line of byte offset off of the reader's content, or with
// atNext of the first byte from off that is not white space.
func lineAt(r io.Reader, off int64, atNext bool) int {
	line := 1
	br := bufio.NewReaderSize(r, 64<<10)
	for pos := int64(0); ; pos++ {
		b, err := br.ReadByte()
		if err != nil || (pos >= off && !(atNext && (b == ' ' || b == '\t' || b == '\r' || b == '\n'))) {
			return line
		}
		if b == '\n' {
			line++
		}
	}
}

// locateShareGPT turns an offsetError into an *Error with the line of
// the offset, reading the content again from open; other errors pass.
func locateShareGPT(name string, err error, open func() (io.ReadCloser, error)) error {
	var oe *offsetError
	if !errors.As(err, &oe) {
		return err
	}
	line := 0
	if rc, oerr := open(); oerr == nil {
		line = lineAt(rc, oe.off, oe.atNext)
		rc.Close()
	}
	return &Error{File: name, Line: line, Field: oe.field, Err: oe.err}
}

// typeName says a Go type the way a JSON author thinks of it.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Bool:
		return "true or false"
	}
	return "a number"
}
