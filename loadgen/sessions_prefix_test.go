package loadgen

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// promiseSource is graphSource whose even sessions' traces gave hash ids
// promising 30 of 100 prompt tokens; the odd ones gave none.
type promiseSource struct{ graphSource }

func (s *promiseSource) Next() (*prompts.Prompt, error) {
	k := s.i
	p, err := s.graphSource.Next()
	if err == nil && k%2 == 0 {
		p.Graph.HashIDs, p.Graph.PromisedPrefixTokens, p.Graph.PromptTokens = true, 30, 100
	}
	return p, err
}

// The promised prefix share is in each session's line only where the
// trace promised one, and over those sessions in the summary; the
// server's hit rate is absent until measured, and both survive the
// histograms.json state that merge reads.
func TestSessionPromisedPrefix(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
		recs, info := collect(t, context.Background(), c, &promiseSource{graphSource{n: 4}},
			Options{Stages: []Stage{{Rate: 5, Duration: 2 * time.Second}}})
		lines := 0
		for _, r := range recs {
			if r.SessionDone == nil {
				continue
			}
			lines++
			b, _ := json.Marshal(r.SessionDone.Line())
			even := strings.HasSuffix(r.Session, "0") || strings.HasSuffix(r.Session, "2")
			has := strings.Contains(string(b), `"promised_prefix_tokens":30`) && strings.Contains(string(b), `"promised_prefix_share":0.3`)
			if even != has || (!even && strings.Contains(string(b), "promised")) {
				t.Errorf("session %s line %s: promised present %v, want %v", r.Session, b, has, even)
			}
		}
		if lines != 4 {
			t.Fatalf("%d session lines, want 4", lines)
		}
		m := metricsOf(recs)
		s := m.Summary(info, schema.SummaryMeta{}).Sessions
		if s == nil || s.PromisedPrefixShare == nil || *s.PromisedPrefixShare != 0.3 {
			t.Fatalf("summary sessions promised share %v, want 0.3", s.PromisedPrefixShare)
		}
		if s.ServerPrefixHitRate != nil {
			t.Error("server prefix hit rate present without telemetry")
		}
		s.SetServerPrefixHitRate(nil)
		if s.ServerPrefixHitRate != nil {
			t.Error("a nil rate set a rate")
		}
		rate := 0.25
		s.SetServerPrefixHitRate(&rate)
		if s.ServerPrefixHitRate == nil || *s.ServerPrefixHitRate != 0.25 {
			t.Errorf("server rate %v, want 0.25", s.ServerPrefixHitRate)
		}
		st, err := m.State()
		if err != nil {
			t.Fatal(err)
		}
		back, err := MeasuredFromState(st)
		if err != nil {
			t.Fatal(err)
		}
		if s2 := back.Summary(info, schema.SummaryMeta{}).Sessions; s2 == nil || s2.PromisedPrefixShare == nil || *s2.PromisedPrefixShare != 0.3 {
			t.Errorf("after the state round trip: %+v", s2)
		}
	})
}
