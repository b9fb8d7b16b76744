package telemetry

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dialectCases parse a fixture of each row of the dialect table: the family
// told, the ServerSample figures present (JSON keys) and the capacity
// figures read. Adding a row to dialects needs a case here
// (TestDialectRows fails without one).
var dialectCases = []struct {
	row      Family
	fixture  string
	opts     ParseOptions
	family   Family
	figures  string // JSON keys present, besides "family"
	capacity string // capKeys read
}{
	{row: FamilyTriton, fixture: "triton.prom", family: "triton",
		figures:  "waiting queue_delay ttft e2e queue_delay_unavailable gpus server_model_note",
		capacity: "triton_executions triton_inferences"},
	{row: FamilyTriton, fixture: "triton-ensemble-before.prom", opts: ParseOptions{ServerModel: "ensemble"}, family: "triton",
		figures:  "waiting queue_delay e2e queue_delay_unavailable server_model",
		capacity: "triton_executions triton_inferences"},
	{row: FamilyVLLM, fixture: "vllm.prom", family: "vllm",
		figures: "running waiting kv_usage prompt_tokens_total generation_tokens_total queue_delay ttft e2e"},
	{row: FamilyVLLM, fixture: "vllm-capacity-before.prom", family: "vllm", figures: "kv_blocks_max",
		capacity: "prefix_cache_hits prefix_cache_queries preemptions spec_accepted_tokens spec_draft_tokens tokens_per_step"},
	{row: FamilySGLang, fixture: "sglang.prom", family: "sglang",
		figures: "running waiting kv_usage prompt_tokens_total generation_tokens_total queue_delay ttft e2e cache_hit_rate"},
	{row: FamilySGLang, fixture: "sglang-capacity-before.prom", family: "sglang", figures: "cache_hit_rate",
		capacity: "retracted_requests"},
	{row: FamilyTGI, fixture: "tgi.prom", family: "tgi",
		figures: "running waiting kv_usage prompt_tokens_total generation_tokens_total queue_delay e2e"},
	{row: FamilyTGI, fixture: "tgi-capacity-before.prom", family: "tgi", capacity: "tgi_batch_forward tgi_batch_next_size"},
	{row: FamilyLlamaCPP, fixture: "llamacpp.prom", family: "llamacpp",
		figures: "running waiting kv_usage prompt_tokens_total generation_tokens_total queue_delay_unavailable"},
	{row: FamilyTRTLLM, fixture: "trtllm-serve-before.prom", family: "trtllm",
		figures: "running waiting kv_usage kv_blocks_used kv_blocks_max prompt_tokens_total generation_tokens_total queue_delay"},
	{row: FamilyTRTLLM, fixture: "triton-trtllm.prom", opts: ParseOptions{ServerModel: "ensemble"}, family: "triton+trtllm",
		figures:  "running waiting kv_usage kv_blocks_used kv_blocks_max queue_delay e2e queue_delay_unavailable queue_delay_note server_model",
		capacity: "triton_executions triton_inferences"},
	{row: FamilyDCGM, fixture: "dcgm.prom", family: "dcgm-exporter", figures: "gpus"},
	{row: FamilyDCGM, fixture: "dcgm-old-namespace.prom", family: "dcgm-exporter", figures: "gpus"},
}

func TestDialectRows(t *testing.T) {
	t.Parallel()
	covered := map[Family]bool{}
	for _, c := range dialectCases {
		covered[c.row] = true
		t.Run(c.fixture, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := ParseExpositionWith(f, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Family != c.family {
				t.Errorf("family %q, want %q", s.Family, c.family)
			}
			if !slices.Contains(strings.Split(string(s.Family), "+"), string(c.row)) {
				t.Errorf("family %q lacks the row's %q", s.Family, c.row)
			}
			if got := presentKeys(t, s); got != sortedFields(c.figures) {
				t.Errorf("figures %q, want %q", got, sortedFields(c.figures))
			}
			var caps []string
			for k := range s.series.counters {
				caps = append(caps, string(k))
			}
			for k := range s.series.hists {
				caps = append(caps, string(k))
			}
			if got := sortedFields(strings.Join(caps, " ")); got != sortedFields(c.capacity) {
				t.Errorf("capacity %q, want %q", got, sortedFields(c.capacity))
			}
		})
	}
	for _, d := range dialects {
		if !covered[d.family] {
			t.Errorf("dialect %q has no case in dialectCases", d.family)
		}
	}
}

// TestDialectNames checks what every row promises: each metric it reads
// carries one of its prefixes (so it is told by family and read through
// its series hook), and no two rows claim the same names.
func TestDialectNames(t *testing.T) {
	t.Parallel()
	for i, d := range dialects {
		for _, name := range dialectNames(d) {
			base, _, _ := strings.Cut(name, "{")
			if got := dialectOf(dialects, base); got != i {
				t.Errorf("row %q reads %q, which belongs to row %d", d.family, name, got)
			}
		}
		if d.queueNoteWith != "" && dialectOf(dialects, d.queueNoteWith) < 0 {
			t.Errorf("row %q: queue note metric %q is no row's", d.family, d.queueNoteWith)
		}
		for j, e := range dialects {
			for _, p := range d.prefixes {
				for _, q := range e.prefixes {
					if i != j && strings.HasPrefix(p, q) {
						t.Errorf("prefix %q of %q overlaps %q of %q", p, d.family, q, e.family)
					}
				}
			}
		}
	}
}

// TestAddDialect adds a server by one row, and nothing else: an unknown
// endpoint becomes that server, read by the row's names and fallbacks,
// with its place in the table deciding precedence.
func TestAddDialect(t *testing.T) {
	t.Parallel()
	acme := dialect{
		family:   "acme",
		prefixes: []string{"acme_"},
		read: figures{
			running: gauges("acme_active_requests"),
			waiting: gauges("acme_queued_requests"),
			kvUsage: []gauge{{name: "acme_kv_used_bytes", over: "acme_kv_total_bytes"}},
			queue:   []latency{{name: "acme_queue_ms", scale: 1e-3}},
		},
		fallback: figures{running: gauges("acme_legacy_running")},
		noQueue:  "acme exposes no queue histogram",
	}
	const text = `# TYPE acme_active_requests gauge
acme_active_requests{pool="a"} 3
acme_active_requests{pool="b"} 2
acme_queued_requests 4
acme_kv_used_bytes 300
acme_kv_total_bytes 1200
# TYPE acme_queue_ms histogram
acme_queue_ms_bucket{le="10"} 6
acme_queue_ms_bucket{le="100"} 9
acme_queue_ms_bucket{le="+Inf"} 10
acme_queue_ms_sum 250
acme_queue_ms_count 10
`
	rows := append(slices.Clip(dialects), acme)
	parse := func(rows []dialect, text string) *ServerSample {
		t.Helper()
		s, err := parseDialects(strings.NewReader(text), ParseOptions{}, rows)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	before := parse(dialects, text)
	if before.Family != FamilyUnknown || before.Running != nil || before.QueueDelay != nil {
		t.Fatalf("without the row: %+v", before)
	}
	s := parse(rows, text)
	if s.Family != "acme" {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running (two pools summed)", s.Running, 5)
	wantVal(t, "waiting", s.Waiting, 4)
	wantVal(t, "kv usage (a ratio)", s.KVUsage, 0.25)
	if q := s.QueueDelay; q == nil || q.Source != "acme_queue_ms" || q.Count != 10 || !near(q.Sum, 0.25) ||
		!containsBucket(q.Buckets, Bucket{LeSeconds: 0.01, Count: 6}) || !containsBucket(q.Buckets, Bucket{LeSeconds: 0.1, Count: 9}) {
		t.Errorf("queue delay (ms read as seconds) %+v", q)
	}
	if s.QueueDelayUnavailable != "" {
		t.Errorf("queue unavailable %q with a queue histogram", s.QueueDelayUnavailable)
	}

	// The fallback, and the reason for no queue delay, where the usual
	// series are missing.
	s = parse(rows, "acme_legacy_running 7\n")
	wantVal(t, "running (fallback)", s.Running, 7)
	if s.Family != "acme" || s.QueueDelayUnavailable != acme.noQueue {
		t.Errorf("family %q, queue unavailable %q", s.Family, s.QueueDelayUnavailable)
	}

	// Beside vLLM, the earlier row wins each figure both give; the new
	// row's fallback stays behind every row's read.
	s = parse(rows, text+"vllm:num_requests_running 11\n")
	if s.Family != "vllm+acme" {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running (vLLM's)", s.Running, 11)
	wantVal(t, "waiting (acme's)", s.Waiting, 4)
	s = parse(rows, "acme_legacy_running 7\nvllm:num_requests_running 11\n")
	wantVal(t, "running (vLLM's read before acme's fallback)", s.Running, 11)
}

// dialectNames lists every metric name a row reads.
func dialectNames(d dialect) []string {
	var out []string
	for _, f := range []figures{d.read, d.fallback} {
		for _, gs := range [][]gauge{f.running, f.waiting, f.kvUsage, f.kvBlocksUsed, f.kvBlocksMax, f.promptTokens, f.generationTokens} {
			for _, g := range gs {
				out = append(out, g.name)
				if g.over != "" {
					out = append(out, g.over)
				}
			}
		}
		for _, ls := range [][]latency{f.queue, f.ttft, f.e2e} {
			for _, l := range ls {
				out = append(out, l.name)
				if l.perRequest != "" {
					out = append(out, l.perRequest)
				}
			}
		}
	}
	for _, c := range slices.Concat(d.counters, d.histograms) {
		out = append(out, c.names...)
	}
	out = append(out, d.cacheHitRate...)
	for _, g := range d.gpus {
		out = append(out, g.name)
	}
	return out
}

// presentKeys lists the JSON keys of s other than "family", sorted.
func presentKeys(t *testing.T, s *ServerSample) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "family")
	return strings.Join(slices.Sorted(maps.Keys(m)), " ")
}

func sortedFields(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}
