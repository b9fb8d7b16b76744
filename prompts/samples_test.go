package prompts

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The trace excerpts under testdata/mixes are synthetic: generated here,
// not copied from the published traces, in each trace's own format.
// Regenerate with:
//
//	go test ./prompts -run TestGenerateSampleTraces -gen-samples
var genSamples = flag.Bool("gen-samples", false, "rewrite the sample traces under testdata/mixes")

const samplesDir = "../testdata/mixes"

func TestGenerateSampleTraces(t *testing.T) {
	t.Parallel()
	if !*genSamples {
		t.Skip("run with -gen-samples to rewrite the sample traces")
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(samplesDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("azure-conv-excerpt.csv", genAzure())
	write("burstgpt-excerpt.csv", genBurstGPT())
	write("mooncake-excerpt.jsonl", genMooncake())
}

// lengthDist draws a token length for the generators.
func lengthDist(r *rng, mean, stddev float64, lo, hi int) int {
	d := dist{kind: DistLognormal, mean: mean, stddev: stddev, min: float64(lo), max: float64(hi)}
	cv := stddev / mean
	s2 := plog(1 + cv*cv)
	d.sig, d.mu = math.Sqrt(s2), plog(mean)-s2/2
	return int(d.sample(r))
}

// burstyGaps returns n inter-arrival gaps with a mean of meanGap: Poisson
// arrivals whose rate switches between calm and bursty minutes, as
// production chat traffic does.
func burstyGaps(r *rng, n int, meanGap time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		rate := 1.0
		if (i/40)%3 == 2 {
			rate = 3 // a burst
		}
		u := r.float64()
		out[i] = time.Duration(-plog(1-u) / rate * float64(meanGap))
	}
	return out
}

func genAzure() string {
	r := newRNG(2023, fnv64("azure"))
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	t := time.Date(2023, 11, 16, 18, 15, 46, 680590000, time.UTC)
	for _, gap := range burstyGaps(r, 240, 500*time.Millisecond) {
		t = t.Add(gap)
		// Seven fraction digits, as the 2023 files have.
		frac := t.Nanosecond() / 100
		fmt.Fprintf(&b, "%s.%07d,%d,%d\n", t.Format("2006-01-02 15:04:05"), frac,
			lengthDist(r, 1000, 900, 20, 8000), lengthDist(r, 220, 180, 2, 1500))
	}
	return b.String()
}

func genBurstGPT() string {
	r := newRNG(2024, fnv64("burstgpt"))
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	ts := 5.0
	for i, gap := range burstyGaps(r, 200, 700*time.Millisecond) {
		ts += gap.Seconds()
		model := "ChatGPT"
		if r.intn(4) == 0 {
			model = "GPT-4"
		}
		in, out := lengthDist(r, 600, 700, 1, 6000), lengthDist(r, 250, 220, 1, 2000)
		if i%37 == 36 {
			out = 0 // failed requests are logged with no response tokens
		}
		logType := "Conversation log"
		if r.intn(3) == 0 {
			logType = "API log"
		}
		fmt.Fprintf(&b, "%d,%s,%d,%d,%d,%s\n", int64(ts), model, in, out, in+out, logType)
	}
	return b.String()
}

func genMooncake() string {
	r := newRNG(2025, fnv64("mooncake"))
	var b strings.Builder
	type chat struct{ hashes []int64 }
	var chats []chat
	next := int64(1) // block 0 is the system prompt every request shares
	ms := 0.0
	for i := 0; i < 150; i++ {
		var hashes []int64
		var in int
		if len(chats) > 0 && r.intn(2) == 0 {
			// A follow-up turn: the conversation so far, plus new blocks.
			c := &chats[r.intn(len(chats))]
			add := 1 + r.intn(3)
			for k := 0; k < add; k++ {
				c.hashes = append(c.hashes, next)
				next++
			}
			hashes = append([]int64(nil), c.hashes...)
			in = (len(hashes)-1)*512 + 1 + r.intn(512)
		} else {
			nb := 1 + r.intn(6)
			hashes = []int64{0}
			for k := 1; k < nb; k++ {
				hashes = append(hashes, next)
				next++
			}
			in = (len(hashes)-1)*512 + 1 + r.intn(512)
			chats = append(chats, chat{hashes: append([]int64(nil), hashes...)})
		}
		out := lengthDist(r, 250, 150, 8, 1000)
		hs := make([]string, len(hashes))
		for k, h := range hashes {
			hs[k] = fmt.Sprint(h)
		}
		fmt.Fprintf(&b, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%s]}\n",
			int64(ms), in, out, strings.Join(hs, ", "))
		ms += 1000 * burstyGaps(r, 1, 800*time.Millisecond)[0].Seconds()
	}
	return b.String()
}
