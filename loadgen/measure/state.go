package measure

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/results/schema"
)

func encodeHist(h *hdrhistogram.Histogram) (string, error) {
	b, err := schema.EncodeHistogram(h)
	return string(b), err
}

func decodeHist(s string) (*hdrhistogram.Histogram, error) {
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, err
	}
	// The decoder keeps the encoded bounds; re-home the counts into the
	// standard bounds so every histogram merges with every other.
	out := NewHistogram()
	if dropped := out.Merge(h); dropped > 0 {
		return nil, fmt.Errorf("%d values outside the histogram bounds", dropped)
	}
	return out, nil
}

func (g *Group) state() (schema.GroupState, error) {
	s := schema.GroupState{Sent: g.Sent, OK: g.OK, Errors: g.Errors, Dropped: g.Dropped, Retries: g.Retries,
		ErrorsByKind: g.ErrorsByKind, FirstErrors: g.FirstErrors, InputTokens: g.InputTokens, OutputTokens: g.OutputTokens,
		RequestedInputTokens: g.RequestedInputTokens, Good: g.Good, Unjudged: g.Unjudged, TokenSources: g.TokenSources,
		ChunkTokenSources: g.ChunkTokenSources, FirstNs: int64(g.first), LastNs: int64(g.last), Seen: g.seen,
		Hist: map[string]string{}}
	for n, h := range g.Hist {
		e, err := encodeHist(h)
		if err != nil {
			return s, fmt.Errorf("%s: %w", n, err)
		}
		s.Hist[n] = e
	}
	for n, v := range g.work {
		if s.Work == nil {
			s.Work = map[string]int64{}
		}
		s.Work[n] = v
	}
	for n, c := range g.ratio {
		if s.Ratios == nil {
			s.Ratios = map[string][2]int64{}
		}
		s.Ratios[n] = *c
	}
	return s, nil
}

func groupOf(s schema.GroupState) (*Group, error) {
	g := newGroup(nil)
	g.Sent, g.OK, g.Errors, g.Dropped, g.Retries = s.Sent, s.OK, s.Errors, s.Dropped, s.Retries
	g.InputTokens, g.OutputTokens, g.RequestedInputTokens, g.Good, g.Unjudged = s.InputTokens, s.OutputTokens, s.RequestedInputTokens, s.Good, s.Unjudged
	g.first, g.last, g.seen = time.Duration(s.FirstNs), time.Duration(s.LastNs), s.Seen
	for k, v := range s.ErrorsByKind {
		g.ErrorsByKind[k] = v
	}
	for k, v := range s.FirstErrors {
		g.FirstErrors[k] = v
	}
	for k, v := range s.TokenSources {
		g.TokenSources[k] = v
	}
	for k, v := range s.ChunkTokenSources {
		g.ChunkTokenSources[k] = v
	}
	for n, e := range s.Hist {
		h, err := decodeHist(e)
		if err != nil {
			return nil, fmt.Errorf("histogram %s: %w", n, err)
		}
		g.Hist[n] = h
	}
	g.mergeRates(s.Work, s.Ratios)
	return g, nil
}

// mergeRates adds the counts of the rate rows made outside the built-in
// table (work per floor, bad and counted per ratio) into g's.
func (g *Group) mergeRates(work map[string]int64, ratios map[string][2]int64) {
	for n, v := range work {
		if g.work == nil {
			g.work = map[string]int64{}
		}
		g.work[n] += v
	}
	for n, c := range ratios {
		if g.ratio == nil {
			g.ratio = map[string]*[2]int64{}
		}
		if g.ratio[n] == nil {
			g.ratio[n] = new([2]int64)
		}
		g.ratio[n][0] += c[0]
		g.ratio[n][1] += c[1]
	}
}

// State is m whole (see schema.MetricsState).
func (m *Metrics) State() (*schema.MetricsState, error) {
	st := &schema.MetricsState{Classes: map[string]schema.GroupState{}, Stages: map[string]schema.GroupState{}, Warmup: m.Warmup}
	var err error
	if st.All, err = m.All.state(); err != nil {
		return nil, err
	}
	for n, g := range m.Classes {
		if st.Classes[n], err = g.state(); err != nil {
			return nil, fmt.Errorf("class %s: %w", n, err)
		}
	}
	for n, g := range m.Stages {
		if st.Stages[n], err = g.state(); err != nil {
			return nil, fmt.Errorf("stage %s: %w", n, err)
		}
	}
	for turn, h := range m.TurnTTFT {
		if st.TurnTTFT == nil {
			st.TurnTTFT = map[string]string{}
		}
		e, err := encodeHist(h)
		if err != nil {
			return nil, err
		}
		st.TurnTTFT[strconv.Itoa(turn)] = e
	}
	if m.Sessions != nil {
		if st.Sessions, err = m.Sessions.state(); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
	}
	for n, h := range m.LagCorrected {
		if st.LagCorrected == nil {
			st.LagCorrected = map[string]string{}
		}
		e, err := encodeHist(h)
		if err != nil {
			return nil, err
		}
		st.LagCorrected[n] = e
	}
	return st, nil
}

// MetricsFromState rebuilds the metrics a State was taken of.
func MetricsFromState(st *schema.MetricsState) (*Metrics, error) {
	m := NewMetrics()
	var err error
	if m.All, err = groupOf(st.All); err != nil {
		return nil, err
	}
	for n, gs := range st.Classes {
		if m.Classes[n], err = groupOf(gs); err != nil {
			return nil, fmt.Errorf("class %s: %w", n, err)
		}
	}
	for n, gs := range st.Stages {
		if m.Stages[n], err = groupOf(gs); err != nil {
			return nil, fmt.Errorf("stage %s: %w", n, err)
		}
	}
	m.Warmup = st.Warmup
	for k, e := range st.TurnTTFT {
		turn, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("turn %q: not a number", k)
		}
		if m.TurnTTFT[turn], err = decodeHist(e); err != nil {
			return nil, fmt.Errorf("turn %d: %w", turn, err)
		}
	}
	if st.Sessions != nil {
		if m.Sessions, err = sessionStatsOf(st.Sessions); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
	}
	for n, e := range st.LagCorrected {
		if m.LagCorrected[n], err = decodeHist(e); err != nil {
			return nil, fmt.Errorf("lag-corrected %s: %w", n, err)
		}
	}
	return m, nil
}

// Merge adds o into m: counts summed, histograms merged (HDR merges are
// exact: the result is the histogram of both populations), windows joined.
// shift moves o's instants onto m's epoch (o's epoch − m's).
func (m *Metrics) Merge(o *Metrics, shift time.Duration) {
	m.All.merge(o.All, shift)
	mergeGroups(m.Classes, o.Classes, shift)
	mergeGroups(m.Stages, o.Stages, shift)
	m.Warmup += o.Warmup
	if o.Sessions != nil {
		if m.Sessions == nil {
			m.Sessions = newSessionStats()
		}
		m.Sessions.merge(o.Sessions)
	}
	for n, h := range o.LagCorrected {
		m.lagCorrected(n).Merge(h)
	}
	for turn, h := range o.TurnTTFT {
		if mh, ok := m.TurnTTFT[turn]; ok {
			mh.Merge(h)
		} else {
			nh := NewHistogram()
			nh.Merge(h)
			m.TurnTTFT[turn] = nh
		}
	}
}

func mergeGroups(into, from map[string]*Group, shift time.Duration) {
	names := make([]string, 0, len(from))
	for n := range from {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := into[n]
		if !ok {
			g = newGroup(nil)
			into[n] = g
		}
		g.merge(from[n], shift)
	}
}

func (g *Group) merge(o *Group, shift time.Duration) {
	g.Sent += o.Sent
	g.OK += o.OK
	g.Errors += o.Errors
	g.Dropped += o.Dropped
	g.Retries += o.Retries
	g.InputTokens += o.InputTokens
	g.OutputTokens += o.OutputTokens
	g.RequestedInputTokens += o.RequestedInputTokens
	g.Good += o.Good
	g.Unjudged += o.Unjudged
	for k, v := range o.ErrorsByKind {
		g.ErrorsByKind[k] += v
	}
	for k, v := range o.FirstErrors {
		g.firstError(v, k)
	}
	for k, v := range o.TokenSources {
		g.TokenSources[k] += v
	}
	for k, v := range o.ChunkTokenSources {
		g.ChunkTokenSources[k] += v
	}
	ratios := make(map[string][2]int64, len(o.ratio))
	for n, c := range o.ratio {
		ratios[n] = *c
	}
	g.mergeRates(o.work, ratios)
	for n, h := range o.Hist {
		if gh, ok := g.Hist[n]; ok {
			gh.Merge(h)
		} else {
			nh := NewHistogram()
			nh.Merge(h)
			g.Hist[n] = nh
		}
	}
	if o.seen {
		first, last := o.first+shift, o.last+shift
		if !g.seen || first < g.first {
			g.first = first
		}
		if !g.seen || last > g.last {
			g.last = last
		}
		g.seen = true
	}
}
