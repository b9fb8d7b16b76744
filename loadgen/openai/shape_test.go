package openai

import (
	"bytes"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen/sse"
)

// checkShape decodes a then b through one shape and b alone with the
// reference decoder: the shape's decoding of b, whether it came through
// the shape or in full, is the reference's, text and error alike.
func checkShape(t *testing.T, a, b []byte) {
	t.Helper()
	for _, keep := range []bool{false, true} {
		var sh shape
		var ev, ref event
		sh.decode(a, &ev, nil, keep)
		got, err := sh.decode(b, &ev, []byte("p"), keep)
		want, refErr := decodeSlow(b, &ref, []byte("p"), keep)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("keepText %v: after %q, %q: error %v, reference %v", keep, a, b, err, refErr)
		}
		if err == nil && (ev != ref || !bytes.Equal(got, want)) {
			t.Fatalf("keepText %v: after %q, %q:\n%+v %q\nreference\n%+v %q", keep, a, b, ev, got, ref, want)
		}
	}
}

// shapePairs are pairs of events a stream may send one after the other:
// each seed stream's consecutive events, and an event beside variants of
// itself (the token's text changed, escaped, emptied, cut, or a byte
// outside it changed).
func shapePairs(t testing.TB) [][2][]byte {
	var pairs [][2][]byte
	for _, stream := range seedStreams(t) {
		s := sse.NewScanner(bytes.NewReader(stream))
		var prev []byte
		for s.Next() {
			cur := bytes.Clone(s.Data())
			if prev != nil {
				pairs = append(pairs, [2][]byte{prev, cur})
			}
			prev = cur
		}
	}
	a := []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}`)
	for _, v := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"x\"y"},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"\n\u00e9\ud83d\ude00"},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"id":"d","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a`,
		"{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\x01\"},\"finish_reason\":null}]}",
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a\q"},"finish_reason":null}]}`,
		"{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\"},\"finish_reason\":null}]}",
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a","content":"b"},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]} `,
	} {
		pairs = append(pairs, [2][]byte{a, []byte(v)})
	}
	return pairs
}

func TestShapeAgreesWithReference(t *testing.T) {
	pairs := shapePairs(t)
	if len(pairs) < 30 {
		t.Fatalf("%d pairs", len(pairs))
	}
	for _, p := range pairs {
		checkShape(t, p[0], p[1])
	}
}

// Most events of a stream are decoded through its shape: here every
// content event after the first of the vLLM-shaped stream.
func TestShapeMatchesAStream(t *testing.T) {
	events := bytes.Split(vllmStream(50), []byte("\n\n"))
	var sh shape
	var ev event
	matched := 0
	for _, e := range events {
		data, ok := bytes.CutPrefix(e, []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		if sh.ok {
			if _, ok := sh.match(data, &ev, nil, false); ok {
				matched++
				continue
			}
		}
		if _, err := sh.decode(data, &ev, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	if matched < 48 {
		t.Errorf("%d of 50 content events matched the shape", matched)
	}
}

func FuzzShape(f *testing.F) {
	for _, p := range shapePairs(f) {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkShape(t, a, b)
	})
}
