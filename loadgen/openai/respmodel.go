package openai

// responseModel is the top-level "model" string of an event or body (the
// last one, as in a map), or "" when it has none or the fast parser does
// not handle it. It is read from one event per response, apart from the
// timing decoder, so the per-token path pays nothing for it. When the
// value is the model that was sent it returns sent itself: no allocation
// in the common case.
func responseModel(data []byte, sent string) string {
	p := parser{b: data}
	p.ws()
	if p.peek() != '{' {
		return ""
	}
	var m rawStr
	key, more, err := p.objectStart()
	for more && err == nil {
		if string(key) == "model" {
			m, err = p.strOrSkip(1)
		} else {
			err = p.skip(1)
		}
		if err == nil {
			key, more, err = p.member()
		}
	}
	if err != nil || !m.ok {
		return ""
	}
	if m.flags == 0 && string(m.bytes(data)) == sent {
		return sent
	}
	return decodeStr(data, m)
}
