package evidence

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/redact"
	tgversion "github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// EnvironmentSchema names environment.json's format (results names the
// file: results.EnvironmentFile; its copies of the inputs are under
// results.InputsDir).
const EnvironmentSchema = "tailgate.environment/v1"

// Environment is what a reviewer needs to know about where a run ran.
type Environment struct {
	Schema  string         `json:"schema"`
	Tool    tgversion.Tool `json:"tool"`
	Command []string       `json:"command"` // secrets redacted
	Host    Host           `json:"host"`
	Started time.Time      `json:"started,omitzero"`
	Ended   time.Time      `json:"ended,omitzero"`
	// Server is what the target said about itself, when it said anything.
	Server *Server `json:"server,omitempty"`
	// GPUs are the accelerators seen on this host (NVML or the NVIDIA
	// driver's /proc files); empty when there are none.
	GPUs []GPU `json:"gpus,omitempty"`
	// Inputs are the input files, by role (plan, slo, mix), copied into
	// inputs/ with their hashes.
	Inputs map[string]Input `json:"inputs,omitempty"`
}

// Host describes the machine.
type Host struct {
	Name        string `json:"name"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel,omitempty"`
	Distro      string `json:"distro,omitempty"`
	CPUModel    string `json:"cpu_model,omitempty"`
	CPUs        int    `json:"cpus"` // logical CPUs usable by the process
	CPUThreads  int    `json:"cpu_threads,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
}

// Server is what the target reported about itself (URL redacted, models,
// version headers, or why it said nothing): the protocol client's
// loadgen.ServerDescriber fills it with the run's own transport, so
// --ca-file, --insecure and --header apply.
type Server = loadgen.ServerInfo

// GPU is one accelerator.
type GPU struct {
	Index       int    `json:"index"`
	Model       string `json:"model"`
	UUID        string `json:"uuid,omitempty"`
	Serial      string `json:"serial,omitempty"`
	BusID       string `json:"bus_id,omitempty"`
	Driver      string `json:"driver,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	Source      string `json:"source"` // "nvml" or "procfs"
}

// Input is one input file copied into the evidence.
type Input struct {
	Source string `json:"source"` // the path given
	Copy   string `json:"copy"`   // relative to the evidence directory
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Fingerprint describes this host and process. args is the command line
// (os.Args); it is redacted.
func Fingerprint(toolName, version string, args []string) Environment {
	return fingerprintAt("/", toolName, version, args)
}

// fingerprintAt is Fingerprint with /proc and /etc read under procRoot, a
// parameter rather than a package variable so that tests point each call
// at their own tree and can run in parallel.
func fingerprintAt(procRoot, toolName, version string, args []string) Environment {
	e := Environment{Schema: EnvironmentSchema, Tool: tgversion.Tool{Name: toolName, Version: version, Revision: tgversion.Revision(), Go: runtime.Version()},
		Command: redact.Args(args)}
	e.Host.Name, _ = os.Hostname()
	e.Host.OS, e.Host.Arch, e.Host.CPUs = runtime.GOOS, runtime.GOARCH, runtime.NumCPU()
	if b, err := os.ReadFile(filepath.Join(procRoot, "proc/sys/kernel/osrelease")); err == nil {
		e.Host.Kernel = strings.TrimSpace(string(b))
	}
	if kv := readKV(filepath.Join(procRoot, "etc/os-release"), "="); kv != nil {
		e.Host.Distro = strings.Trim(kv["PRETTY_NAME"], `"`)
	}
	e.Host.CPUModel, e.Host.CPUThreads = cpuInfo(filepath.Join(procRoot, "proc/cpuinfo"))
	if kv := readKV(filepath.Join(procRoot, "proc/meminfo"), ":"); kv != nil {
		if f := strings.Fields(kv["MemTotal"]); len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				e.Host.MemoryBytes = n * 1024
			}
		}
	}
	e.GPUs = gpusFromProcAt(procRoot)
	return e
}

func cpuInfo(path string) (model string, threads int) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			threads++
		case "model name", "Model", "cpu model":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, threads
}

func readKV(path, sep string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, sep); ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv
}

// GPUsFromProc reads NVIDIA GPUs from the driver's /proc files
// (/proc/driver/nvidia/gpus/*/information and /proc/driver/nvidia/version),
// which need neither cgo nor NVML. They give model, UUID, bus and driver,
// not serials: a caller with NVML should fill those in.
func GPUsFromProc() []GPU { return gpusFromProcAt("/") }

// gpusFromProcAt is GPUsFromProc with /proc read under procRoot.
func gpusFromProcAt(procRoot string) []GPU {
	base := filepath.Join(procRoot, "proc/driver/nvidia")
	dirs, _ := filepath.Glob(filepath.Join(base, "gpus", "*", "information"))
	sort.Strings(dirs)
	driver := ""
	if b, err := os.ReadFile(filepath.Join(base, "version")); err == nil {
		// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue ..."
		line, _, _ := strings.Cut(string(b), "\n")
		if _, rest, ok := strings.Cut(line, "Kernel Module"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				driver = f[0]
			}
		}
	}
	var out []GPU
	for i, p := range dirs {
		kv := readKV(p, ":")
		g := GPU{Index: i, Model: kv["Model"], UUID: kv["GPU UUID"], BusID: kv["Bus Location"], Driver: driver, Source: "procfs"}
		if g.Model == "" {
			continue
		}
		out = append(out, g)
	}
	return out
}

// CopyInput copies src byte for byte to dir/inputs/NAME (NAME is src's
// base name, prefixed with role when needed to keep names apart) and
// returns its record.
func CopyInput(dir, role, src string) (Input, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return Input{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, results.InputsDir), 0o755); err != nil {
		return Input{}, err
	}
	name := role + "-" + filepath.Base(src)
	rel := results.InputsDir + "/" + name
	if err := os.WriteFile(filepath.Join(dir, results.InputsDir, name), b, 0o644); err != nil {
		return Input{}, err
	}
	sum := sha256.Sum256(b)
	return Input{Source: src, Copy: rel, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}, nil
}

// WriteEnvironment writes e to dir/environment.json.
func WriteEnvironment(dir string, e *Environment) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", results.EnvironmentFile, err)
	}
	return writeAtomic(filepath.Join(dir, results.EnvironmentFile), append(b, '\n'))
}
