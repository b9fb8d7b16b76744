// Package ollamatest runs a real Ollama server for tests, on loopback,
// serving models written by gguf.Tiny. The binary is the one
// scripts/ollama.sh builds and caches (or $TAILGATE_OLLAMA); without it a
// test skips, unless TAILGATE_REQUIRE_OLLAMA=1 (CI builds it), where it
// fails.
package ollamatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/gguf"
)

// Version is the Ollama release scripts/ollama.sh builds.
const Version = "v0.17.4"

// RequireEnv names the variable that, set to 1, makes a missing binary a failure rather than a skip.
const RequireEnv = "TAILGATE_REQUIRE_OLLAMA"

// BinaryEnv names the binary to use instead of the cached build.
const BinaryEnv = "TAILGATE_OLLAMA"

// Models Start creates: Tiny answers run to their token limit, TinyEOS
// ends some answers early at the end-of-sequence token.
const (
	Tiny    = "tiny"
	TinyEOS = "tiny-eos"
)

// TinyEOSLogit puts TinyEOS's end-of-sequence token just above the words
// Ollama's default sampling keeps (top_k 40, temperature 0.8): a few per
// cent of tokens, so some answers of 12 tokens stop early, a few at once.
const TinyEOSLogit = 1.2

// CachedBinary is where scripts/ollama.sh puts the binary.
func CachedBinary() string {
	cache := os.Getenv("TAILGATE_OLLAMA_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "tailgate", "ollama-"+Version)
	}
	return filepath.Join(cache, "bin", "ollama")
}

// Binary returns the Ollama binary, or skips or fails t without one.
func Binary(t testing.TB) string {
	t.Helper()
	p := os.Getenv(BinaryEnv)
	if p == "" {
		p = CachedBinary()
	}
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("ollama not found at %s and %s=1: run scripts/ollama.sh build", p, RequireEnv)
	}
	t.Skipf("ollama not found at %s (scripts/ollama.sh build, ~6 min); SKIPPING the real-server tests; set %s=1 to fail instead", p, RequireEnv)
	return ""
}

// Options configure a server.
type Options struct {
	// NumParallel is OLLAMA_NUM_PARALLEL (default 4).
	NumParallel int
	// MaxQueue is OLLAMA_MAX_QUEUE (0: Ollama's default, 512). Requests
	// wait in that queue while the scheduler is busy (loading a model);
	// a loaded model's runner queues them itself, without limit.
	MaxQueue int
	// Unloaded leaves the models unloaded: the first request to each pays
	// its load (Start loads both otherwise).
	Unloaded bool
}

// Server is a running Ollama.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Host string // 127.0.0.1:PORT
	bin  string
	dir  string
	env  []string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	// blobs maps a model to its GGUF's blob name (sha256-HEX), which its
	// runner's command line carries.
	blobs map[string]string
}

// Start runs Ollama on a free loopback port with models Tiny and TinyEOS
// created and loaded, and stops it when the test ends (printing its log if
// the test failed).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	if o.NumParallel == 0 {
		o.NumParallel = 4
	}
	dir := t.TempDir()
	s := &Server{bin: bin, dir: dir, Host: freeAddr(t), blobs: map[string]string{}}
	s.URL = "http://" + s.Host
	s.env = append(os.Environ(), "OLLAMA_HOST="+s.Host, "OLLAMA_MODELS="+filepath.Join(dir, "models"), "HOME="+dir,
		"OLLAMA_NUM_PARALLEL="+strconv.Itoa(o.NumParallel), "OLLAMA_KEEP_ALIVE=-1", "OLLAMA_NOPRUNE=1",
		"OLLAMA_CONTEXT_LENGTH=2048")
	if o.MaxQueue > 0 {
		s.env = append(s.env, "OLLAMA_MAX_QUEUE="+strconv.Itoa(o.MaxQueue))
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "ollama.log"))
			if len(b) > 16<<10 {
				b = b[len(b)-16<<10:]
			}
			t.Logf("ollama log (tail):\n%s", b)
		}
	})
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	for name, eos := range map[string]float64{Tiny: 0, TinyEOS: TinyEOSLogit} {
		if err := s.create(name, eos); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{Tiny, TinyEOS} {
		if o.Unloaded {
			break
		}
		// Load both now, so no test's first request pays the load.
		if err := s.post("/api/generate", map[string]any{"model": m, "keep_alive": -1}); err != nil {
			t.Fatalf("loading %s: %v", m, err)
		}
	}
	return s
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Restart starts the server again on the same port and models after Stop
// (Start has started it once); it returns once the server answers.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return fmt.Errorf("ollama already running (pid %d)", s.cmd.Process.Pid)
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "ollama.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "serve")
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = s.env, log, log, s.dir
	// Its own process group, so Stop reaches the runner it spawns too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting ollama: %w", err)
	}
	s.cmd, s.log, s.done = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.cmd = nil
			return fmt.Errorf("ollama exited at start: %v (log in %s)", cmd.ProcessState, log.Name())
		default:
		}
		if r, err := http.Get(s.URL + "/api/version"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("ollama did not answer on %s within 30 s", s.URL)
}

// Stop stops the server (SIGTERM to its process group, SIGKILL after 10 s)
// and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
	}
	s.log.Close()
	s.cmd = nil
}

// Runner returns the PID of the runner subprocess that serves model, or 0.
func (s *Server) Runner(model string) int {
	for _, pid := range s.Runners() {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(cmdline, []byte(s.blobs[model])) {
			return pid
		}
	}
	return 0
}

// Runners returns the PIDs of the server's runner subprocesses (the
// processes that hold a model and generate).
func (s *Server) Runners() []int {
	if s.cmd == nil {
		return nil
	}
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(s.cmd.Process.Pid) {
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if bytes.Contains(cmdline, []byte("runner")) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// create writes a Tiny model and has the server create it under name.
func (s *Server) create(name string, eosLogit float64) error {
	path := filepath.Join(s.dir, name+".gguf")
	var model bytes.Buffer
	if err := gguf.Write(&model, gguf.Tiny(gguf.TinyOptions{Seed: 1, EOSLogit: eosLogit})); err != nil {
		return err
	}
	if err := os.WriteFile(path, model.Bytes(), 0o644); err != nil {
		return err
	}
	s.blobs[name] = fmt.Sprintf("sha256-%x", sha256.Sum256(model.Bytes()))
	mf := filepath.Join(s.dir, name+".Modelfile")
	if err := os.WriteFile(mf, []byte("FROM ./"+name+".gguf\n"), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "create", name, "-f", mf)
	cmd.Env, cmd.Dir = s.env, s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ollama create %s: %w: %s", name, err, out)
	}
	return nil
}

// post sends body as JSON to path and reads the whole answer.
func (s *Server) post(path string, body any) error {
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, buf.Bytes())
	}
	return nil
}
