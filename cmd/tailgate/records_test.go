package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// check holds requests.jsonl to the count and checksum summary.json says
// were written: an emptied, torn or changed file is INVALID (exit 3,
// records_disagree) naming the count it expected, and so is an emptied
// file under a summary written before the checksum was kept; merge
// refuses such a shard, naming its directory.
func TestCheckRecordsDisagree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte(lenientSLO), 0o644)
	base := t.TempDir()
	shard := filepath.Join(base, "run")
	start := time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--arrival", "constant",
		"--duration", "1s", "--max-tokens", "4", "--metrics-url", "off", "--nvml", "off", "--slo", sloFile, "--out", shard,
		"--shard", "0/1", "--start-at", start)
	if code != slo.ExitOK && code != slo.ExitInconclusive {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, shard)
	if s.Records == nil || s.Records.Count != s.Requests.Sent+s.Requests.Dropped || len(s.Records.SHA256) != 64 {
		t.Fatalf("summary.json records %+v, want the count of %d requests and a sha256", s.Records, s.Requests.Sent+s.Requests.Dropped)
	}
	want := s.Records.Count
	orig, err := os.ReadFile(filepath.Join(shard, results.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	if c, out, errOut := tgCmd("check", "--slo", sloFile, shard); c != code {
		t.Fatalf("check of the untouched run: exit %d, run's %d\n%s\n%s", c, code, out, errOut)
	}

	copyRun := func(t *testing.T, records []byte, legacy bool) string {
		t.Helper()
		d := filepath.Join(t.TempDir(), "copy")
		os.MkdirAll(d, 0o755)
		ents, _ := os.ReadDir(shard)
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(shard, e.Name()))
			if e.Name() == results.SummaryFile && legacy {
				var m map[string]any
				json.Unmarshal(b, &m)
				delete(m, "records")
				b, _ = json.Marshal(m)
			}
			os.WriteFile(filepath.Join(d, e.Name()), b, 0o644)
		}
		os.WriteFile(filepath.Join(d, results.RecordsFile), records, 0o644)
		return d
	}
	lines := strings.SplitAfter(string(orig), "\n")
	torn := strings.Join(lines[:len(lines)/2], "") + lines[len(lines)/2][:10]
	changed := strings.Replace(string(orig), `"output_tokens":4`, `"output_tokens":3`, 1)
	if changed == string(orig) {
		t.Fatal("no output_tokens to change in the records")
	}
	for _, c := range []struct {
		name, records string
		legacy        bool
		says          string
	}{
		{"emptied", "", false, "holds 0 records, but"},
		{"torn", torn, false, "records, but"},
		{"changed", changed, false, "sha256"},
		{"emptied, no checksum", "", true, "holds 0 records, but"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := copyRun(t, []byte(c.records), c.legacy)
			code, out, errOut := tgCmd("check", "--slo", sloFile, d)
			all := out + errOut
			if code != slo.ExitInvalid || !strings.Contains(all, "records_disagree") || !strings.Contains(all, c.says) {
				t.Errorf("check: exit %d, want %d with records_disagree (%q)\n%s", code, slo.ExitInvalid, c.says, all)
			}
			if c.name != "changed" && !strings.Contains(all, " "+itoa(want)+" ") {
				t.Errorf("check does not name the %d records expected:\n%s", want, all)
			}
			if c.name == "changed" {
				return
			}
			code, out, errOut = tgCmd("merge", "--slo", sloFile, "--out", filepath.Join(t.TempDir(), "merged"), d)
			if code == slo.ExitOK || !strings.Contains(out+errOut, "merge refused") || !strings.Contains(out+errOut, d) {
				t.Errorf("merge of a shard whose records disagree: exit %d, want a refusal naming %s\n%s%s", code, d, out, errOut)
			}
		})
	}
	// The untouched shard still merges, and the merged summary vouches
	// for the merged file.
	merged := filepath.Join(base, "merged")
	if c, out, errOut := tgCmd("merge", "--slo", sloFile, "--out", merged, shard); c != code {
		t.Fatalf("merge: exit %d, run's %d\n%s\n%s", c, code, out, errOut)
	}
	if m := readSummary(t, merged); m.Records == nil || m.Records.Count != want {
		t.Errorf("merged summary records %+v, want %d", m.Records, want)
	}
	if c, out, _ := tgCmd("check", "--slo", sloFile, merged); c != code {
		t.Errorf("check of the merge: exit %d, want %d\n%s", c, code, out)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
