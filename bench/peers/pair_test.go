package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestPair(t *testing.T) {
	truth := []served{
		{ID: "0", Start: 1_000_000, First: 51_000_000},    // 50 ms at the server
		{ID: "1", Start: 2_000_000, First: 52_500_000},    // 50.5 ms
		{ID: "2", Start: 900_000_000, First: 950_000_000}, // 50 ms
		{ID: "4", Start: 5_000_000, First: 55_000_000},    // failed at the client
	}
	reqs := []clientReq{
		{ID: "0", Sent: 500_000, First: 51_700_000},      // 51.2 ms: +1.2 ms
		{ID: "1", Sent: 1_600_000, First: 52_700_000},    // 51.1 ms: +0.6 ms
		{ID: "2", Sent: 899_000_000, First: 953_000_000}, // 54 ms: +4 ms
		{ID: "3", Sent: 3_000_000, First: 60_000_000},    // the server kept no record
		{ID: "4", Sent: 4_000_000, Failed: true},         // failed
	}
	for _, c := range []struct {
		name string
		from int64
		want pairing
	}{
		{"all", 0, pairing{Errs: []int64{1_200_000, 600_000, 4_000_000}, Unpaired: 1, Failed: 1}},
		// From 1.6 ms: request 0 (sent at 0.5 ms) is left out; 1, sent at
		// the cut-off, is kept.
		{"from 1.6 ms", 1_600_000, pairing{Errs: []int64{600_000, 4_000_000}, Unpaired: 1, Failed: 1, Left: 1}},
		{"from 10 ms", 10_000_000, pairing{Errs: []int64{4_000_000}, Left: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pair(reqs, truth, c.from); !reflect.DeepEqual(got, c.want) {
				t.Errorf("pair: %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestMeanP99(t *testing.T) {
	if _, _, ok := meanP99(nil); ok {
		t.Error("meanP99(nil): ok")
	}
	// 1..100 ms: mean 50.5, nearest-rank p99 the 99th.
	var errs []int64
	for i := 100; i >= 1; i-- {
		errs = append(errs, int64(i)*1_000_000)
	}
	if m, p, ok := meanP99(errs); !ok || m != 50.5 || p != 99 {
		t.Errorf("meanP99(1..100 ms): %v %v %v, want 50.5 99 true", m, p, ok)
	}
	if errs[0] != 100_000_000 {
		t.Error("meanP99 sorted its argument")
	}
	if m, p, _ := meanP99([]int64{-2_000_000}); m != -2 || p != -2 {
		t.Errorf("meanP99(-2 ms): %v %v", m, p)
	}
}

func TestParseTailgate(t *testing.T) {
	jsonl := `{"seq":0,"intended_us":0,"sent_us":10,"first_token_us":50210,"end_us":60000,"output_tokens":16}
{"seq":1,"warmup":true,"intended_us":0,"sent_us":12,"end_us":100,"error_kind":"connect","error":"refused"}
{"seq":2,"intended_us":0,"sent_us":20,"end_us":100,"error_kind":"cut"}
`
	got, err := parseTailgate("2026-12-03T22:00:00.000000500Z", strings.NewReader(jsonl))
	if err != nil {
		t.Fatal(err)
	}
	base := int64(1796335200_000000500)
	want := []clientReq{
		{ID: "0", Sent: base + 10_000, First: base + 50_210_000},
		{ID: "1", Sent: base + 12_000, Failed: true},
		{ID: "2", Sent: base + 20_000, Failed: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseTailgate:\n got %+v\nwant %+v", got, want)
	}
	if _, err := parseTailgate("yesterday", strings.NewReader(jsonl)); err == nil || !strings.Contains(err.Error(), "run.started") {
		t.Errorf("bad run.started: %v", err)
	}
	if _, err := parseTailgate("2026-12-03T22:00:00Z", strings.NewReader("{\"seq\":0}\n{")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

func TestParseFloor(t *testing.T) {
	start, got, err := parseFloor(strings.NewReader("start 100\nfloor-0 110 50120\nfloor-1 115 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []clientReq{{ID: "floor-0", Sent: 110, First: 50120}, {ID: "floor-1", Sent: 115, Failed: true}}
	if start != 100 || !reflect.DeepEqual(got, want) {
		t.Errorf("parseFloor: %d %+v", start, got)
	}
	for _, bad := range []string{"", "floor-0 1 2\n", "start 1\nfloor-0 1\n", "start 1\nfloor-0 x 2\n"} {
		if _, _, err := parseFloor(strings.NewReader(bad)); err == nil {
			t.Errorf("parseFloor(%q): no error", bad)
		}
	}
}

// TestAnswer feeds the minimal server's answer to answer in every split
// in two and byte by byte: the first event is found once, in the read
// that completes its "data:", and the answer ends only with its last
// chunk.
func TestAnswer(t *testing.T) {
	ev := string(tokenEvent)
	ans := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev) + fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev) +
		fmt.Sprintf("%x\r\n%s\r\n", len(usageEvent(2)), usageEvent(2)) + "0\r\n\r\n"
	dataEnd := strings.Index(ans, "data:") + len("data:")
	check := func(name string, reads []string) {
		t.Helper()
		var a answer
		a.reset()
		n, dataAt := 0, -1
		for i, r := range reads {
			data, done, err := a.feed([]byte(r))
			if err != nil {
				t.Fatalf("%s: read %d: %v", name, i, err)
			}
			n += len(r)
			if data {
				if dataAt >= 0 {
					t.Fatalf("%s: data twice", name)
				}
				if n < dataEnd || n-len(r) >= dataEnd {
					t.Fatalf("%s: data in read %d (bytes %d..%d), want the one with byte %d", name, i, n-len(r), n, dataEnd)
				}
				dataAt = i
			}
			if done != (i == len(reads)-1) {
				t.Fatalf("%s: read %d of %d: done %v", name, i, len(reads), done)
			}
		}
		if dataAt < 0 {
			t.Fatalf("%s: no data", name)
		}
	}
	for i := 1; i < len(ans); i++ {
		check(fmt.Sprintf("split at %d", i), []string{ans[:i], ans[i:]})
	}
	var bytewise []string
	for i := range ans {
		bytewise = append(bytewise, ans[i:i+1])
	}
	check("byte by byte", bytewise)
	// The same answer object, reset, takes the next answer.
	var a answer
	a.reset()
	a.feed([]byte(ans))
	a.reset()
	if data, done, err := a.feed([]byte(ans)); !data || !done || err != nil {
		t.Errorf("second answer: %v %v %v", data, done, err)
	}
	a.reset()
	if _, _, err := a.feed([]byte("HTTP/1.1 503 Service Unavailable\r\n\r\n")); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}
