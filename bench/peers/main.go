// Command peers measures tailgate beside the tools users would otherwise
// pick — wrk and hey for plain HTTP, a minimal no-parse reader for streams
// — all on this machine in one run, and prints one table of ratios
// (make bench-peers; scripts/bench-peers.sh checks for wrk and hey).
//
// Every tool is a child process, so each one's CPU time and peak RSS come
// from the kernel's accounting of that process alone; the endpoints are a
// minimal server (this program's "serve" mode) in another process on
// loopback. Absolute figures depend on the machine and on what else runs
// on it; the ratios, measured minutes apart against the same server, are
// what to read.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve":
			serve(os.Args[2:])
			return
		case "read":
			read(os.Args[2:])
			return
		case "floor":
			floor(os.Args[2:])
			return
		case "grpcfloor":
			grpcFloor(os.Args[2:])
			return
		}
	}
	if err := orchestrate(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-peers:", err)
		os.Exit(1)
	}
}

// ---- the minimal endpoint --------------------------------------------

const chatPath = "/v1/chat/completions"

var (
	nonStreamBody = []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	tokenEvent    = []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"finish_reason\":null}]}\n\n")
	maxTokensRe   = regexp.MustCompile(`"max_tokens":\s*(\d+)`)
)

func usageEvent(n int) []byte {
	return []byte(fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, n+5))
}

// serve answers OpenAI chat requests: one JSON body when not streamed; a
// stream of max_tokens one-token events, at once (ttft = itl = 0) or on a
// fixed clock; it keeps each delayed stream's X-Request-Id, handler start
// and first event's flush (wall clock, Unix ns: the clients on this host
// read the same clock) for GET /truth, which returns them and forgets them.
func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	ttft := fs.Duration("ttft", 0, "time to the first event")
	itl := fs.Duration("itl", 0, "time between events")
	fs.Parse(args)
	var mu sync.Mutex
	var truth []served
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model"}]}`))
	})
	mux.HandleFunc("/truth", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, _ := json.Marshal(truth)
		truth = nil
		mu.Unlock()
		w.Write(b)
	})
	mux.HandleFunc(chatPath, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(nonStreamBody)
			return
		}
		n := 16
		if m := maxTokensRe.FindSubmatch(body); m != nil {
			n, _ = strconv.Atoi(string(m[1]))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if *ttft == 0 && *itl == 0 {
			bw := bufio.NewWriterSize(w, 32<<10)
			for i := 0; i < n; i++ {
				bw.Write(tokenEvent)
			}
			bw.Write(usageEvent(n))
			bw.Flush()
			return
		}
		time.Sleep(*ttft)
		for i := 0; i < n; i++ {
			if i > 0 {
				time.Sleep(*itl)
			}
			w.Write(tokenEvent)
			fl.Flush()
			if i == 0 {
				t := served{ID: id, Start: start.UnixNano(), First: time.Now().UnixNano()}
				mu.Lock()
				truth = append(truth, t)
				mu.Unlock()
			}
		}
		w.Write(usageEvent(n))
	})
	srv := &http.Server{Handler: mux}
	ln, err := listen()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("http://" + ln.Addr().String())
	srv.Serve(ln)
}

func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// ---- the no-parse reader ---------------------------------------------

// read is the cheapest possible streaming client: c workers, each sending
// its next request when the last ends, counting "data: " lines without
// parsing them. It marks what this machine's loopback can carry.
func read(args []string) {
	fs := flag.NewFlagSet("read", flag.ExitOnError)
	url := fs.String("url", "", "chat completions URL")
	c := fs.Int("c", 64, "streams at once")
	d := fs.Duration("d", 5*time.Second, "how long")
	tokens := fs.Int("tokens", 128, "max_tokens")
	fs.Parse(args)
	body := fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, *tokens)
	tr := &http.Transport{MaxIdleConnsPerHost: *c + 16, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	var events, reqs atomic.Int64
	deadline := time.Now().Add(*d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := hc.Post(*url, "application/json", strings.NewReader(body))
				if err != nil {
					continue
				}
				br := bufio.NewReaderSize(resp.Body, 16<<10)
				n := int64(0)
				for {
					line, err := br.ReadSlice('\n')
					if bytes.HasPrefix(line, []byte("data: {")) {
						n++
					}
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				events.Add(n - 1) // the usage event carries no token
				reqs.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d %d %f\n", events.Load(), reqs.Load(), time.Since(start).Seconds())
}

// ---- the orchestra ---------------------------------------------------

// child is a finished child process's accounting.
type child struct {
	stdout, stderr string
	cpu            time.Duration // user + system
	maxRSSKiB      int64
	wall           time.Duration
}

func runChild(ctx context.Context, name string, args ...string) (child, error) {
	return runChildEnv(ctx, nil, name, args...)
}

// runChildEnv is runChild with env added to the child's environment.
func runChildEnv(ctx context.Context, env []string, name string, args ...string) (child, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	t0 := time.Now()
	err := cmd.Run()
	c := child{stdout: o.String(), stderr: e.String(), wall: time.Since(t0)}
	if cmd.ProcessState != nil {
		c.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			c.maxRSSKiB = ru.Maxrss
		}
	}
	if err != nil {
		var ee *exec.ExitError
		// tailgate's 1 and 3 still wrote a summary; the caller judges it.
		if !errors.As(err, &ee) || !strings.HasPrefix(filepath.Base(name), "tailgate") {
			return c, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(c.stderr))
		}
	}
	return c, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// server is a running minimal endpoint.
type server struct {
	url string
	cmd *exec.Cmd
}

func startServer(self string, args ...string) (*server, error) {
	cmd := exec.Command(self, append([]string{"serve"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start: %w", err)
	}
	return &server{url: strings.TrimSpace(line), cmd: cmd}, nil
}

func (s *server) stop() { s.cmd.Process.Kill(); s.cmd.Wait() }

// summary is the part of tailgate's summary.json read here.
type summary struct {
	Run struct {
		Started string `json:"started"`
	} `json:"run"`
	Requests struct {
		OK     int64 `json:"ok"`
		Errors int64 `json:"errors"`
	} `json:"requests"`
	Tokens struct {
		Output int64 `json:"output"`
	} `json:"tokens"`
	Throughput struct {
		RequestsPerS     float64 `json:"requests_per_s"`
		OutputTokensPerS float64 `json:"output_tokens_per_s"`
	} `json:"throughput"`
	LatencyMs map[string]struct {
		Count int64   `json:"count"`
		Mean  float64 `json:"mean"`
		P99   float64 `json:"p99"`
	} `json:"latency_ms"`
}

type bench struct {
	self, tailgate string
	d              time.Duration
	tmp            string
	rows           [][]string
	notes          []string
}

// row adds a table row, padded to six cells so every row aligns.
func (b *bench) row(cells ...string) {
	for len(cells) < 6 {
		cells = append(cells, "")
	}
	b.rows = append(b.rows, cells)
}

// tg runs tailgate with args and returns its summary and accounting.
func (b *bench) tg(ctx context.Context, args ...string) (summary, child, error) {
	return b.tgEnv(ctx, nil, args...)
}

// tgEnv is tg with env added to tailgate's environment.
func (b *bench) tgEnv(ctx context.Context, env []string, args ...string) (summary, child, error) {
	return b.tgOut(ctx, env, nil, args...)
}

// tgOut is tgEnv with keep, when not nil, called with the results
// directory and the summary before the directory is removed.
func (b *bench) tgOut(ctx context.Context, env []string, keep func(dir string, s summary) error, args ...string) (summary, child, error) {
	out, _ := os.MkdirTemp(b.tmp, "run")
	args = append(args, "--model", "m", "--metrics-url", "off", "--nvml", "off", "--no-progress", "--self-check", "warn",
		"--max-error-rate", "1", "--grace", "5s", "--json", "--out", out)
	c, err := runChildEnv(ctx, env, b.tailgate, append([]string{"run"}, args...)...)
	var s summary
	if err != nil {
		return s, c, err
	}
	if err := json.Unmarshal([]byte(c.stdout), &s); err != nil {
		return s, c, fmt.Errorf("tailgate run %s: summary: %w\n%s", strings.Join(args, " "), err, tail(c.stderr))
	}
	if keep != nil {
		if err := keep(out, s); err != nil {
			return s, c, err
		}
	}
	os.RemoveAll(out)
	return s, c, nil
}

var reqPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func perSec(out string) float64 {
	m := reqPerSec.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func secs(d time.Duration) string { return strconv.Itoa(int(math.Ceil(d.Seconds()))) + "s" }

func orchestrate(args []string) error {
	fs := flag.NewFlagSet("bench-peers", flag.ExitOnError)
	tailgate := fs.String("tailgate", "bin/tailgate", "the tailgate binary")
	d := fs.Duration("duration", 5*time.Second, "length of each measurement")
	only := fs.String("steps", "plain,streamed,ttft,lag,memory,grpc", "which measurements to make, comma-separated")
	markdown := fs.Bool("markdown", false, "print the table as Markdown, for docs/performance.md")
	fs.Parse(args)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tgPath, err := filepath.Abs(*tailgate)
	if err != nil {
		return err
	}
	tools := []string{tgPath}
	if strings.Contains(*only, "plain") {
		tools = append(tools, "wrk", "hey")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (Debian: apt-get install wrk hey; make build makes bin/tailgate)", tool)
		}
	}
	tmp, err := os.MkdirTemp("", "bench-peers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{self: self, tailgate: tgPath, d: *d, tmp: tmp}
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{{"plain", b.plainHTTP}, {"streamed", b.streamed}, {"ttft", b.ttftError}, {"lag", b.scheduleLag}, {"memory", b.memory}, {"grpc", b.grpcStreams}}
	for _, step := range steps {
		if !strings.Contains(","+*only+",", ","+step.name+",") {
			continue
		}
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("bench-peers on %s, %d CPUs, %s per measurement, load average %s at the end; tools are separate processes, the endpoint another one\n\n",
		host, numCPU(), *d, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	if *markdown {
		writeMarkdown(os.Stdout, b.rows)
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		for _, r := range b.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		tw.Flush()
	}
	for _, n := range b.notes {
		fmt.Println("\n" + n)
	}
	return nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return bytes.Count(b, []byte("\nprocessor")) + 1
}

// plainHTTP: non-streaming requests/s and requests per client CPU-second
// at 64 and 256 connections: tailgate, wrk, hey.
func (b *bench) plainHTTP(ctx context.Context) error {
	srv, err := startServer(b.self)
	if err != nil {
		return err
	}
	defer srv.stop()
	body := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	lua := filepath.Join(b.tmp, "post.lua")
	os.WriteFile(lua, []byte(fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", body)), 0o644)
	b.row("non-streaming, 1 token", "tailgate", "hey", "wrk", "tailgate/hey", "tailgate/wrk")
	for _, c := range []int{64, 256} {
		hc, err := runChild(ctx, "hey", "-z", secs(b.d), "-c", strconv.Itoa(c), "-m", "POST", "-T", "application/json", "-d", body, srv.url+chatPath)
		if err != nil {
			return err
		}
		heyRate := perSec(hc.stdout)
		heyCPU := heyRate * hc.wall.Seconds() / hc.cpu.Seconds()
		wc, err := runChild(ctx, "wrk", "-t", "2", "-c", strconv.Itoa(c), "-d", secs(b.d), "-s", lua, srv.url+chatPath)
		if err != nil {
			return err
		}
		wrkRate := perSec(wc.stdout)
		wrkCPU := wrkRate * wc.wall.Seconds() / wc.cpu.Seconds()
		for _, hc := range httpClients {
			s, tc, err := b.tg(ctx, "--target", srv.url, "--concurrency", strconv.Itoa(c), "--stream=false", "--max-tokens", "1", "--duration", b.d.String(), "--http-client", hc)
			if err != nil {
				return err
			}
			tgRate := s.Throughput.RequestsPerS
			tgCPU := float64(s.Requests.OK) / tc.cpu.Seconds()
			b.row(fmt.Sprintf("  c%d req/s, %s", c, hc), fmt.Sprintf("%.0f", tgRate), fmt.Sprintf("%.0f", heyRate), fmt.Sprintf("%.0f", wrkRate), ratio(tgRate, heyRate), ratio(tgRate, wrkRate))
			b.row(fmt.Sprintf("  c%d req per client CPU-s, %s", c, hc), fmt.Sprintf("%.0f", tgCPU), fmt.Sprintf("%.0f", heyCPU), fmt.Sprintf("%.0f", wrkCPU), ratio(tgCPU, heyCPU), ratio(tgCPU, wrkCPU))
		}
	}
	b.notes = append(b.notes, "non-streaming: tailgate is closed loop (--concurrency, --out written), as hey and wrk are; hey's and wrk's CPU-seconds include their start-up, per request it is negligible.")
	return nil
}

// streamed: tokens/s with full parsing at 64, 256 and 1024 streams against
// a zero-delay SSE endpoint, beside the no-parse reader.
func (b *bench) streamed(ctx context.Context) error {
	srv, err := startServer(b.self)
	if err != nil {
		return err
	}
	defer srv.stop()
	b.row("")
	b.row("streamed tokens/s, zero delay, 128 tokens", "tailgate", "no-parse reader", "", "tailgate/reader", "goal")
	for _, c := range []int{64, 256, 1024} {
		rc, err := runChild(ctx, b.self, "read", "-url", srv.url+chatPath, "-c", strconv.Itoa(c), "-d", b.d.String(), "-tokens", "128")
		if err != nil {
			return err
		}
		var ev, reqs int64
		var el float64
		fmt.Sscan(rc.stdout, &ev, &reqs, &el)
		rate := float64(ev) / el
		for _, hc := range httpClients {
			s, tc, err := b.tg(ctx, "--target", srv.url, "--concurrency", strconv.Itoa(c), "--max-tokens", "128", "--duration", b.d.String(), "--http-client", hc)
			if err != nil {
				return err
			}
			b.row(fmt.Sprintf("  c%d, %s", c, hc), fmt.Sprintf("%.0f", s.Throughput.OutputTokensPerS), fmt.Sprintf("%.0f", rate), "", ratio(s.Throughput.OutputTokensPerS, rate), "≥ 0.90×")
			// Every token timestamped and in the histograms; the
			// CPU-seconds include start-up and the results files. A
			// client whose CPU-seconds were not measured gets no row.
			if tc.cpu > 0 && rc.cpu > 0 {
				tg, rd := float64(s.Tokens.Output)/tc.cpu.Seconds(), float64(ev)/rc.cpu.Seconds()
				goal := ""
				if c == 256 {
					goal = "≥ 3 M"
				}
				b.row(fmt.Sprintf("  c%d tokens per client CPU-s, %s", c, hc), fmt.Sprintf("%.2f M", tg/1e6), fmt.Sprintf("%.2f M", rd/1e6), "", ratio(tg, rd), goal)
			}
		}
	}
	return nil
}

// ttftError: each request's TTFT error against the server's own record of
// it, paired by X-Request-Id, at 256 streams, 50 ms TTFT, 10 ms ITL, 16
// tokens: tailgate and the floor client in turn against the same server,
// with cold connections, the first second left out, and --preconnect.
func (b *bench) ttftError(ctx context.Context) error {
	srv, err := startServer(b.self, "-ttft", "50ms", "-itl", "10ms")
	if err != nil {
		return err
	}
	defer srv.stop()
	b.row("")
	b.row("TTFT error per request vs the server's clock, c256, 50ms/10ms", "mean ms", "p99 ms", "requests paired", "", "goal")
	var loads, lost []string
	for _, mode := range []struct {
		name string
		args []string
		pre  bool // --preconnect, -preconnect
		skip bool // leave out what was sent in the first second
	}{{"cold connections", nil, false, false}, {"cold, first second left out", []string{"--warmup", "1s"}, false, true}, {"--preconnect", []string{"--preconnect"}, true, false}} {
		if _, err := srv.truth(); err != nil { // reset
			return err
		}
		var tgReqs []clientReq
		var tgFrom int64
		m := startMeter(srv.cmd.Process.Pid)
		_, tc, err := b.tgOut(ctx, nil, func(dir string, s summary) error {
			f, err := os.Open(filepath.Join(dir, "requests.jsonl"))
			if err != nil {
				return err
			}
			defer f.Close()
			if tgReqs, err = parseTailgate(s.Run.Started, f); err != nil {
				return err
			}
			if mode.skip {
				t0, _ := time.Parse(time.RFC3339Nano, s.Run.Started) // parseTailgate read it
				tgFrom = t0.Add(time.Second).UnixNano()
			}
			return nil
		}, append([]string{"--target", srv.url, "--concurrency", "256", "--max-tokens", "16", "--duration", b.d.String()}, mode.args...)...)
		if err != nil {
			return err
		}
		tgLoad := m.words(tc.cpu)
		tgTruth, err := srv.truth()
		if err != nil {
			return err
		}
		fargs := []string{"floor", "-url", srv.url + chatPath, "-c", "256", "-tokens", "16", "-d", b.d.String()}
		if mode.pre {
			fargs = append(fargs, "-preconnect")
		}
		m = startMeter(srv.cmd.Process.Pid)
		fc, err := runChild(ctx, b.self, fargs...)
		if err != nil {
			return err
		}
		flLoad := m.words(fc.cpu)
		flStart, flReqs, err := parseFloor(strings.NewReader(fc.stdout))
		if err != nil {
			return err
		}
		flTruth, err := srv.truth()
		if err != nil {
			return err
		}
		var flFrom int64
		if mode.skip {
			flFrom = flStart + int64(time.Second)
		}
		tp, fp := pair(tgReqs, tgTruth, tgFrom), pair(flReqs, flTruth, flFrom)
		tm, t99, tok := meanP99(tp.Errs)
		fm, f99, fok := meanP99(fp.Errs)
		if !tok || !fok {
			return fmt.Errorf("TTFT error, %s: no request paired with the server's records (tailgate %d, floor %d)", mode.name, len(tp.Errs), len(fp.Errs))
		}
		b.row("  "+mode.name+": tailgate", fmt.Sprintf("%+.2f", tm), fmt.Sprintf("%+.2f", t99), strconv.Itoa(len(tp.Errs)), "", "mean < 1, p99 < 3")
		b.row("    floor client", fmt.Sprintf("%+.2f", fm), fmt.Sprintf("%+.2f", f99), strconv.Itoa(len(fp.Errs)))
		b.row("    tailgate − floor", fmt.Sprintf("%+.2f", tm-fm), fmt.Sprintf("%+.2f", t99-f99))
		loads = append(loads, fmt.Sprintf("%s: tailgate's run %s; the floor's %s", mode.name, tgLoad, flLoad))
		for _, side := range []struct {
			who string
			p   pairing
		}{{"tailgate", tp}, {"floor", fp}} {
			if side.p.Failed > 0 || side.p.Unpaired > 0 {
				lost = append(lost, fmt.Sprintf("%s, %s: %d failed, %d with no server record", mode.name, side.who, side.p.Failed, side.p.Unpaired))
			}
		}
	}
	b.notes = append(b.notes, "TTFT error: per request, the client's TTFT (its send to its first token) minus the server's (its handler's start to its first event's flush), paired by X-Request-Id; both processes read the same wall clock. "+
		"The error is what neither side's timestamp covers: the request's way up (the client's write, loopback, the server's accept and header parsing) and the first event's way down (loopback, the client's wake-up and read, tailgate's parsing). "+
		"The floor client (bench-peers floor: Go, kept-alive raw TCP connections, writes the request and times the first read that brings a \"data:\", no parsing) is the reference for this machine in this run; tailgate − floor is tailgate's own cost (difference of the means, of the p99s). "+
		"Cold connections pay TCP set-up inside the first wave (both clients: the send time is taken before the dial); \"first second left out\" leaves out, on both sides, what was sent in the run's first second; --preconnect opens the pool before the first start (the floor: -preconnect dials every connection before its timed part).")
	if len(lost) > 0 {
		b.notes = append(b.notes, "TTFT error, left out of the figures (a failed request has no TTFT; an unpaired one no server TTFT): "+strings.Join(lost, "; ")+".")
	}
	b.notes = append(b.notes, "TTFT error, the machine over each client's run (/proc/stat: 1 − idle and iowait share of all CPUs; the server's and the client's CPU-seconds): "+strings.Join(loads, "; ")+".")
	return nil
}

// truth returns the server's records since the last call, and forgets them.
func (s *server) truth() ([]served, error) {
	resp, err := http.Get(s.url + "/truth")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var t []served
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return nil, fmt.Errorf("server's /truth: %w", err)
	}
	return t, nil
}

// scheduleLag: open-loop schedule lag p99 at 64, 1024 and 4096 in flight
// (20-token streams at 100 ms per token: about 2 s each), tailgate and the
// floor client (floor -rate) in turn against the same server.
func (b *bench) scheduleLag(ctx context.Context) error {
	srv, err := startServer(b.self, "-ttft", "50ms", "-itl", "100ms")
	if err != nil {
		return err
	}
	defer srv.stop()
	b.row("")
	b.row("schedule lag p99, open loop, 2 s streams", "p99 ms", "requests", "", "", "goal")
	var loads []string
	for _, n := range []int{64, 1024, 4096} {
		rate := float64(n) / 1.95
		pool := min(n, 1024)
		m := startMeter(srv.cmd.Process.Pid)
		s, tc, err := b.tg(ctx, "--target", srv.url, "--rate", fmt.Sprintf("%.1f", rate), "--arrival", "constant", "--max-tokens", "20",
			"--duration", (b.d + 2*time.Second).String(), "--warmup", "2s", "--preconnect="+strconv.Itoa(pool))
		if err != nil {
			return err
		}
		tgLoad := m.words(tc.cpu)
		m = startMeter(srv.cmd.Process.Pid)
		fc, err := runChild(ctx, b.self, "floor", "-url", srv.url+chatPath, "-rate", fmt.Sprintf("%.1f", rate), "-tokens", "20",
			"-d", (b.d + 2*time.Second).String(), "-warmup", "2s", "-c", strconv.Itoa(pool))
		if err != nil {
			return err
		}
		flLoad := m.words(fc.cpu)
		lags, failed, err := parseFloorLag(fc.stdout)
		if err != nil {
			return err
		}
		_, f99, ok := meanP99(lags)
		if !ok {
			return fmt.Errorf("schedule lag, %d in flight: the floor client reported no request", n)
		}
		tl := s.LatencyMs["schedule_lag"]
		t99 := tl.P99
		goal := map[int]string{1024: "< 1 ms", 4096: "< 5 ms"}[n]
		b.row(fmt.Sprintf("  %d in flight: tailgate", n), fmt.Sprintf("%.2f", t99), strconv.FormatInt(tl.Count, 10), "", "", goal)
		b.row("    floor client", fmt.Sprintf("%.2f", f99), fmt.Sprintf("%d (%d failed)", len(lags), failed))
		b.row("    tailgate − floor", fmt.Sprintf("%+.2f", t99-f99))
		loads = append(loads, fmt.Sprintf("%d in flight: tailgate's run %s; the floor's %s", n, tgLoad, flLoad))
	}
	b.notes = append(b.notes, "schedule lag: a request's send − its due time, over what was due after a 2 s warm-up. "+
		"The floor client (bench-peers floor -rate: Go, one goroutine sleeps to each due time and writes the request itself on an idle kept-alive raw TCP connection, the same pool dialled first) is the reference for this machine in this run; tailgate − floor is tailgate's own cost (difference of the p99s).")
	b.notes = append(b.notes, "schedule lag, the machine over each client's run (/proc/stat: 1 − idle and iowait share of all CPUs; the server's and the client's CPU-seconds): "+strings.Join(loads, "; ")+".")
	return nil
}

// memory: client peak RSS at 256, 4096 and 16384 streams (closed loop,
// 3 s streams), per HTTP client; the difference over the streams added is
// the memory per in-flight stream. Each run is bounded in time: the
// schedule, the grace and a minute for start-up and writing.
func (b *bench) memory(ctx context.Context) error {
	srv, err := startServer(b.self, "-ttft", "50ms", "-itl", "100ms")
	if err != nil {
		return err
	}
	defer srv.stop()
	// 16384 streams 100 ms apart would be 164k events/s, more than a
	// 2-core machine serves and reads: the streams would slow down and be
	// cut at the end. 400 ms apart, 8 tokens, they send what 4096 do.
	slow, err := startServer(b.self, "-ttft", "50ms", "-itl", "400ms")
	if err != nil {
		return err
	}
	defer slow.stop()
	b.row("")
	b.row("client memory per in-flight stream", "KiB", "requests ok", "", "", "goal")
	for _, hc := range httpClients {
		sizes := []int{256, 4096, 16384}
		if hc == "nethttp" {
			sizes = sizes[:2]
		}
		rss := map[int]int64{}
		live := map[int]map[string]int64{}
		for _, c := range sizes {
			rctx, cancel := context.WithTimeout(ctx, b.d+5*time.Second+time.Minute)
			// --preconnect: the kernel's accept backlog (somaxconn, often
			// 4096) would otherwise spread 16384 connections' set-up over
			// seconds of SYN retries, and the streams would not all run at
			// once.
			url, tokens := srv.url, "30"
			if c > 4096 {
				url, tokens = slow.url, "8"
			}
			// The live heap and stacks mid-run (tailgate's TAILGATE_PPROF_AT:
			// after a collection, while the streams are in flight): what
			// each stream holds, apart from the collector's headroom.
			// Offsets from the process's start: preconnecting 16384 takes
			// seconds more than 4096.
			prof := filepath.Join(b.tmp, fmt.Sprintf("prof-%s-%d", hc, c))
			at := b.d/2 + time.Second
			if c > 4096 {
				at = b.d + 2*time.Second
			}
			s, ch, err := b.tgEnv(rctx, []string{"TAILGATE_PPROF=" + prof, "TAILGATE_PPROF_AT=" + at.String()},
				"--target", url, "--concurrency", strconv.Itoa(c), "--max-tokens", tokens, "--duration", b.d.String(),
				"--http-client", hc, "--preconnect="+strconv.Itoa(c))
			cancel()
			if err != nil {
				return err
			}
			rss[c] = ch.maxRSSKiB
			live[c] = memStats(filepath.Join(prof, "memstats-at.txt"))
			if c == 256 {
				continue
			}
			per := float64(rss[c]-rss[256]) / float64(c-256)
			b.row(fmt.Sprintf("  %s: (RSS %d MiB at %d − %d MiB at 256) / %d", hc, rss[c]>>10, c, rss[256]>>10, c-256), fmt.Sprintf("%.1f", per),
				fmt.Sprintf("%d (%d failed or cut)", s.Requests.OK, s.Requests.Errors), "", "", "≤ 16 KiB")
			if l, l0 := live[c], live[256]; l["heap_alloc"] > 0 && l0["heap_alloc"] > 0 {
				b.row(fmt.Sprintf("    of which live heap, stacks (mid-run, after a GC; %d goroutines)", l["goroutines"]),
					fmt.Sprintf("%.1f, %.1f", float64(l["heap_alloc"]-l0["heap_alloc"])/float64(c-256)/1024, float64(l["stack_inuse"]-l0["stack_inuse"])/float64(c-256)/1024))
			}
		}
	}
	return nil
}

// memStats reads tailgate's memstats-at.txt ("name value" lines); empty
// when it was not written.
func memStats(path string) map[string]int64 {
	m := map[string]int64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			m[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return m
}

// httpClients are tailgate's two HTTP clients (--http-client), measured
// side by side.
var httpClients = []string{"lean", "nethttp"}

// writeMarkdown prints rows as Markdown tables: a blank row ends a table,
// and the row after it is the next table's header.
func writeMarkdown(w io.Writer, rows [][]string) {
	header := true
	for _, r := range rows {
		if strings.Join(r, "") == "" {
			fmt.Fprintln(w)
			header = true
			continue
		}
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = strings.ReplaceAll(strings.TrimSpace(c), "|", "\\|")
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		if header {
			fmt.Fprintln(w, strings.TrimSuffix(strings.Repeat("| --- ", len(r)), " ")+" |")
			header = false
		}
	}
}
