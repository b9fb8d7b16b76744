package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tailgate-llm/tailgate/internal/seedfiles"
)

// sseEvent is one dispatched event, for comparing scanners.
type sseEvent struct {
	Data, Type, ErrorData string
}

func scanAll(s *Scanner) []sseEvent {
	var out []sseEvent
	for s.Next() {
		out = append(out, sseEvent{string(s.Data()), string(s.Type()), string(s.ErrorData())})
	}
	return out
}

// referenceSSE is the simplest statement of the framing rules Scanner
// implements, for differential tests.
func referenceSSE(in string) (events []sseEvent, partial bool) {
	in = strings.TrimPrefix(in, "\ufeff")
	lines := strings.Split(in, "\n")
	last := lines[len(lines)-1]
	lines = lines[:len(lines)-1] // the piece after the last LF is unterminated
	partial = last != ""
	var cur sseEvent
	var hasData bool
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if l == "" {
			if hasData || cur.ErrorData != "" {
				events = append(events, cur)
			}
			cur, hasData = sseEvent{}, false
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if hasData {
				cur.Data += "\n"
			}
			cur.Data += value
			hasData = true
		case "event":
			cur.Type = value
		case "error":
			cur.ErrorData = value
		}
	}
	if hasData || cur.ErrorData != "" {
		events = append(events, cur)
	}
	return events, partial
}

func TestScanner(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []sseEvent
		partial bool
	}{
		{"space after colon", "data: {\"a\":1}\n\n", []sseEvent{{Data: `{"a":1}`}}, false},
		{"no space (TGI)", "data:{\"a\":1}\n\n", []sseEvent{{Data: `{"a":1}`}}, false},
		{"only one space removed", "data:  x\n\n", []sseEvent{{Data: " x"}}, false},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []sseEvent{{Data: "a"}, {Data: "b"}}, false},
		{"keep-alive comments", ": keep-alive\n\n:\n\ndata: a\n\n:\n\n", []sseEvent{{Data: "a"}}, false},
		{"comment inside event", "data: a\n: ping\ndata: b\n\n", []sseEvent{{Data: "a\nb"}}, false},
		{"unknown fields ignored", "id: 7\nretry: 100\nfoo: bar\nnocolon\ndata: a\n\n", []sseEvent{{Data: "a"}}, false},
		{"multi-line data", "data: a\ndata: b\ndata:\ndata: c\n\n", []sseEvent{{Data: "a\nb\n\nc"}}, false},
		{"empty data is an event", "data:\n\n", []sseEvent{{Data: ""}}, false},
		{"field name alone", "data\n\n", []sseEvent{{Data: ""}}, false},
		{"no data no event", "event: x\n\n\n\n", nil, false},
		{"event type", "event: error\ndata: {}\n\n", []sseEvent{{Data: "{}", Type: "error"}}, false},
		{"type resets after empty event", "event: x\n\ndata: a\n\n", []sseEvent{{Data: "a"}}, false},
		{"legacy error field", "error: {\"code\":500}\n\n", []sseEvent{{ErrorData: `{"code":500}`}}, false},
		{"BOM", "\ufeffdata: a\n\n", []sseEvent{{Data: "a"}}, false},
		{"done with trailing space kept", "data: [DONE] \n\n", []sseEvent{{Data: "[DONE] "}}, false},
		{"no blank line before EOF", "data: a\n\ndata: [DONE]\n", []sseEvent{{Data: "a"}, {Data: "[DONE]"}}, false},
		{"cut inside a line", "data: a\n\ndata: {\"x\"", []sseEvent{{Data: "a"}}, true},
		{"bare CR is not a line end", "data: a\rb\n\n", []sseEvent{{Data: "a\rb"}}, false},
		{"empty input", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range readers(tt.in) {
				s := NewScanner(r.r)
				got := scanAll(s)
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("%s: got %q, want %q", r.name, got, tt.want)
				}
				if s.Err() != nil {
					t.Fatalf("%s: Err = %v", r.name, s.Err())
				}
				if s.PartialLine() != tt.partial {
					t.Fatalf("%s: PartialLine = %v, want %v", r.name, s.PartialLine(), tt.partial)
				}
				ref, refPartial := referenceSSE(tt.in)
				if !reflect.DeepEqual(ref, tt.want) || refPartial != tt.partial {
					t.Fatalf("reference parser disagrees with the table: %q %v", ref, refPartial)
				}
			}
		})
	}
}

type namedReader struct {
	name string
	r    io.Reader
}

// readers yields in as one read, one byte per read, and in halves, so
// events split across reads are covered.
func readers(in string) []namedReader {
	return []namedReader{
		{"whole", strings.NewReader(in)},
		{"one byte", iotest.OneByteReader(strings.NewReader(in))},
		{"half", iotest.HalfReader(strings.NewReader(in))},
	}
}

func TestScannerLongLines(t *testing.T) {
	long := strings.Repeat("x", 1000)
	in := "data: " + long + "\r\n\r\n: " + long + "\n\ndata: b\n\n"
	s := NewScannerSize(iotest.OneByteReader(strings.NewReader(in)), 16)
	got := scanAll(s)
	want := []sseEvent{{Data: long}, {Data: "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}

	s = NewScannerSize(strings.NewReader(in), 16)
	s.SetMaxEventBytes(500)
	if s.Next() || !errors.Is(s.Err(), ErrEventTooLarge) {
		t.Fatalf("over-long line: Next=true or Err=%v, want ErrEventTooLarge", s.Err())
	}

	// Many short data lines add up past the limit too.
	s = NewScanner(strings.NewReader(strings.Repeat("data: 0123456789\n", 100) + "\n"))
	s.SetMaxEventBytes(500)
	if s.Next() || !errors.Is(s.Err(), ErrEventTooLarge) {
		t.Fatalf("over-long event: Err=%v, want ErrEventTooLarge", s.Err())
	}
}

func TestScannerReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	s := NewScanner(r)
	got := scanAll(s)
	if len(got) != 1 || got[0].Data != "a" {
		t.Fatalf("got %q, want only the complete event", got)
	}
	if !errors.Is(s.Err(), boom) {
		t.Fatalf("Err = %v, want boom", s.Err())
	}
}

func TestScannerReset(t *testing.T) {
	s := NewScanner(strings.NewReader("data: a\n\ndata: cut"))
	scanAll(s)
	s.Reset(strings.NewReader("data: b\n\n"))
	got := scanAll(s)
	if len(got) != 1 || got[0].Data != "b" || s.PartialLine() || s.Err() != nil {
		t.Fatalf("after Reset: %q partial=%v err=%v", got, s.PartialLine(), s.Err())
	}
}

// A scanner with its own buffer keeps it across Reset, even for an input
// that is a *bufio.Reader (a pooled scanner must not adopt the caller's),
// and Rest hands back what follows the last event, buffered bytes first.
func TestScannerOwnBuffer(t *testing.T) {
	s := NewScannerSize(nil, 16)
	own := s.r
	caller := bufio.NewReader(strings.NewReader("data: a\n\ntail"))
	s.Reset(caller)
	if s.r != own {
		t.Fatal("Reset adopted the caller's *bufio.Reader")
	}
	if !s.Next() || string(s.Data()) != "a" {
		t.Fatalf("Next = %q, want a", s.Data())
	}
	rest, err := io.ReadAll(s.Rest())
	if err != nil || string(rest) != "tail" {
		t.Fatalf("Rest = %q, %v; want tail", rest, err)
	}

	// Without a buffer of its own, a *bufio.Reader is used as it is.
	if s := NewScanner(caller); s.r != caller {
		t.Fatal("NewScanner wrapped a *bufio.Reader")
	}

	// RetainedBytes grows with the events read, so a pool can drop a
	// scanner one huge event grew.
	s.Reset(strings.NewReader("data: " + strings.Repeat("x", 4096) + "\n\n"))
	if !s.Next() || s.RetainedBytes() < 4096 {
		t.Fatalf("after a 4 KiB event RetainedBytes = %d", s.RetainedBytes())
	}
}

// The TGI native vector has no-space "data:" and bare ":" keep-alives.
func TestScannerTGINative(t *testing.T) {
	b, err := os.ReadFile("testdata/tgi_t2_native.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := scanAll(NewScanner(bytes.NewReader(b)))
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3", len(got))
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Data, `{"index":`) {
			t.Fatalf("event data %q does not start with the JSON object", e.Data)
		}
	}
}

func FuzzSSE(f *testing.F) {
	for _, seed := range seedStreams(f) {
		f.Add(seed)
	}
	f.Add([]byte("data: a\r\n\r\n:\n\nevent: error\ndata: x\ndata: y\n\nerror: z\n\ndata: cut"))
	// The edges of Next's one-line fast path.
	f.Add([]byte("data:x\n\ndata:\n\ndata: \r\n\r\ndata:  y\n\r\ndata: z\r\n\rdata: w\n\ndata: v\n\n\n"))
	f.Add([]byte("\xef\xbb\xbfdata: a\n\ndata: b\ndata: c\n\ndata: d\nevent: e\n\ndata: f\n"))
	f.Add([]byte("data: a\n\ndat: b\n\ndata:\n\ndata\n\ndata: c\n\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantPartial := referenceSSE(string(in))
		for _, r := range []namedReader{
			{"whole", bytes.NewReader(in)},
			{"one byte", iotest.OneByteReader(bytes.NewReader(in))},
		} {
			s := NewScannerSize(r.r, 16)
			got := scanAll(s)
			if s.Err() != nil {
				t.Fatalf("%s: Err = %v", r.name, s.Err())
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %q, reference %q", r.name, got, want)
			}
			if s.PartialLine() != wantPartial {
				t.Fatalf("%s: PartialLine = %v, reference %v", r.name, s.PartialLine(), wantPartial)
			}
			if len(got) > bytes.Count(in, []byte("\n"))+1 {
				t.Fatalf("%d events from %d lines", len(got), bytes.Count(in, []byte("\n")))
			}
		}
		// A buffer that holds whole events, as clients use: Next takes
		// single-line events without its line loop.
		{
			s := NewScannerSize(bytes.NewReader(in), 4<<10)
			got := scanAll(s)
			if s.Err() != nil || !reflect.DeepEqual(got, want) || s.PartialLine() != wantPartial {
				t.Fatalf("4 KiB buffer: got %q (partial %v, %v), reference %q (partial %v)",
					got, s.PartialLine(), s.Err(), want, wantPartial)
			}
		}
		// A pooled scanner over a Waiter, fed in pieces of every size from
		// one byte: the buffer goes back to the pool whenever the input is
		// consumed, lines and events that span reads still come whole.
		for _, size := range []int{1, 2, 3, 7, 64, len(in) + 1} {
			w := &waiterReader{in: in, size: size}
			s := NewPooledScanner()
			s.Reset(w)
			w.s = s
			var got []sseEvent
			for {
				s.Wait()
				if !s.Next() {
					break
				}
				got = append(got, sseEvent{string(s.Data()), string(s.Type()), string(s.ErrorData())})
			}
			if s.Err() != nil || !reflect.DeepEqual(got, want) || s.PartialLine() != wantPartial {
				t.Fatalf("pooled, pieces of %d: got %q (partial %v, %v), reference %q (partial %v)",
					size, got, s.PartialLine(), s.Err(), want, wantPartial)
			}
			if w.heldWaiting > 0 {
				t.Fatalf("pooled, pieces of %d: held a read buffer in %d of %d waits", size, w.heldWaiting, w.waits)
			}
			if len(in) > 0 && w.waits == 0 {
				t.Fatalf("pooled, pieces of %d: never waited without a buffer", size)
			}
			s.Reset(nil)
			if s.r != nil {
				t.Fatal("Reset(nil) kept the read buffer")
			}
		}
	})
}

// waiterReader serves in in pieces of size bytes, one per Read, and as an
// sse.Waiter counts the waits made while the scanner held a read buffer.
type waiterReader struct {
	in          []byte
	size        int
	s           *Scanner
	waits       int
	heldWaiting int
}

func (w *waiterReader) Read(p []byte) (int, error) {
	if len(w.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, w.in[:min(w.size, len(w.in))])
	w.in = w.in[n:]
	return n, nil
}

func (w *waiterReader) WaitRead() error {
	w.waits++
	if w.s.r != nil {
		w.heldWaiting++
	}
	return nil
}

// Pooled scanners read in turns share the pool's buffers: each gives its
// buffer back whenever it waits, mid-event too, and the other's use of it
// meanwhile does not disturb the event it is assembling.
func TestPooledScannersInterleaved(t *testing.T) {
	const n = 50
	in := func(tag string) []byte {
		var b []byte
		for i := range n {
			b = fmt.Appendf(b, "data: %s%d\ndata: more\n\n", tag, i)
		}
		return b
	}
	a, b := &waiterReader{in: in("a"), size: 5}, &waiterReader{in: in("b"), size: 7}
	sa, sb := NewPooledScanner(), NewPooledScanner()
	sa.Reset(a)
	sb.Reset(b)
	a.s, b.s = sa, sb
	for i := range n {
		for _, x := range []struct {
			s   *Scanner
			tag string
		}{{sa, "a"}, {sb, "b"}} {
			x.s.Wait()
			want := fmt.Sprintf("%s%d\nmore", x.tag, i)
			if !x.s.Next() || string(x.s.Data()) != want {
				t.Fatalf("event %d of %s: %q (%v), want %q", i, x.tag, x.s.Data(), x.s.Err(), want)
			}
		}
	}
	if a.heldWaiting+b.heldWaiting > 0 || a.waits == 0 || b.waits == 0 {
		t.Fatalf("waits %d and %d, %d and %d holding a buffer", a.waits, b.waits, a.heldWaiting, b.heldWaiting)
	}
}

// seedStreams is every stream body in testdata, as fuzz seeds.
func seedStreams(tb testing.TB) [][]byte { return seedfiles.Read(tb, "testdata", ".txt") }

// BenchmarkScanner reads the seed streams, one event per token: the
// framing's own cost per event, apart from any protocol's decoding.
func BenchmarkScanner(b *testing.B) {
	var all []byte
	for _, s := range seedStreams(b) {
		all = append(all, s...)
	}
	events := len(scanAll(NewScanner(bytes.NewReader(all))))
	r := bytes.NewReader(all)
	s := NewScannerSize(r, 4<<10)
	b.SetBytes(int64(len(all)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(all)
		s.Reset(r)
		for s.Next() {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
