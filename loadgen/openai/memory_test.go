package openai

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/loopbacktest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// holdServerEnv makes the test binary a server that answers every request
// with a chunked event stream's head and first event, holds the stream
// until its stdin closes, then ends it with [DONE]: streams that wait for
// their next chunk, as thousands do between tokens. A separate process,
// so that its memory is not the client's.
const holdServerEnv = "TAILGATE_TEST_HOLD_SERVER"

func TestHoldServerProcess(t *testing.T) {
	if os.Getenv(holdServerEnv) == "" {
		t.Skip("helper process for BenchmarkIdleStreamMemory")
	}
	// Each line on stdin sends every held stream one more event; the end
	// of stdin ends them.
	release := make(chan struct{})
	var more sync.Cond
	more.L = new(sync.Mutex)
	sent := 0
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			more.L.Lock()
			sent++
			more.Broadcast()
			more.L.Unlock()
		}
		close(release)
		more.L.Lock()
		sent = -1
		more.Broadcast()
		more.L.Unlock()
	}()
	var mu sync.Mutex
	answered := 0
	fmt.Println(loopbacktest.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		for err == nil && req.Method == http.MethodGet {
			// Preconnect's model list: the connection stays for the
			// stream.
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"data\":[]}")
			req, err = http.ReadRequest(br)
		}
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		ev := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(ev), ev)
		mu.Lock()
		answered++
		fmt.Println(answered) // the client waits for its count
		mu.Unlock()
		for done := 0; ; done++ {
			more.L.Lock()
			for sent == done {
				more.Wait()
			}
			end := sent < 0
			more.L.Unlock()
			if end {
				break
			}
			fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
		}
		end := "data: [DONE]\n\n"
		fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(end), end)
	}))
	<-release
	time.Sleep(time.Second) // let the ends go out
}

// startHoldServer starts TestHoldServerProcess in a process of its own:
// its address, the pipe whose lines release one event to every held
// stream (closing it ends them), and its output, one line per stream
// answered. The process ends at tb's cleanup.
func startHoldServer(tb testing.TB) (addr string, stdin io.WriteCloser, lines *bufio.Scanner) {
	tb.Helper()
	srv := exec.Command(os.Args[0], "-test.run=^TestHoldServerProcess$")
	srv.Env = append(os.Environ(), holdServerEnv+"=1")
	stdin, err := srv.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); _ = srv.Wait() })
	lines = bufio.NewScanner(stdout)
	if !lines.Scan() {
		tb.Fatal("hold server: no address")
	}
	return lines.Text(), stdin, lines
}

// BenchmarkIdleStreamMemory measures what a stream costs the client while
// it waits for the server's next chunk: live heap and goroutine stack per
// stream, over 1024 streams held open by a server in another process.
// Each call measures once, whatever b.N (-benchtime=1x); -http-client
// picks the client.
var idleHeapProfile = flag.String("idle-heap-profile", "", "BenchmarkIdleStreamMemory: write a heap profile with the streams held here")

func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 1024
	addr, stdin, lines := startHoldServer(b)
	c, err := New(Config{Endpoint: transport.Endpoint{URL: "http://" + addr,
		Transport: transport.Config{HTTPClient: *httpClientFlag}}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	// As bench-peers runs tailgate: connections made before the streams.
	if got, err := c.Preconnect(context.Background(), n); err != nil || got != n {
		b.Fatalf("preconnect: %d connections, %v", got, err)
	}
	{
		measure := func() (heap, stack uint64) {
			// Each GC halves a stack that uses under a quarter of it.
			for range 4 {
				runtime.GC()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc, ms.StackInuse
		}
		heap0, stack0 := measure()
		// 30 tokens, as bench-peers' memory step asks.
		p := &prompts.Prompt{ID: "m", Messages: testPrompt.Messages, MaxTokens: 30}
		var wg sync.WaitGroup
		recs := make([]*loadgen.Record, n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for i := range n {
			recs[i] = loadgen.NewRecord(time.Now())
			wg.Go(func() { c.Do(ctx, p, recs[i]) })
		}
		for got := 0; got < n; {
			if !lines.Scan() {
				b.Fatal("hold server ended early")
			}
			got, _ = strconv.Atoi(lines.Text())
		}
		// The server has answered every stream; give the clients a moment
		// to read the first event and block on the next.
		time.Sleep(500 * time.Millisecond)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// What sending a request grew the stacks to (before a GC shrinks
		// them): they start at 2 KiB, and 4 KiB is what waiting needs.
		b.ReportMetric(float64(int64(ms.StackInuse)-int64(stack0))/n, "stack-sent-B/stream")
		heap1, stack1 := measure()
		if *idleHeapProfile != "" {
			f, err := os.Create(*idleHeapProfile)
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		b.ReportMetric(float64(int64(heap1)-int64(heap0))/n, "heap-B/stream")
		b.ReportMetric(float64(int64(stack1)-int64(stack0))/n, "stack-B/stream")
		// One more event each: reading it must not grow the stacks that
		// shrank while waiting (a stack grown back stays until a GC).
		runtime.ReadMemStats(&ms)
		inuse := ms.StackInuse
		fmt.Fprintln(stdin)
		time.Sleep(500 * time.Millisecond)
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(int64(ms.StackInuse)-int64(inuse))/n, "stack-growth-B/stream")
		stdin.Close()
		wg.Wait()
		cancel()
		for i, r := range recs {
			if !r.OK() || len(r.Chunks) != 2 {
				b.Fatalf("stream %d: %s %s, %d chunks", i, r.ErrorKind, r.Error, len(r.Chunks))
			}
		}
	}
}
