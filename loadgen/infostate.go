package loadgen

import (
	"errors"
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/results/schema"
)

// State is i in its saved form.
func (i Info) State() schema.InfoState {
	s := schema.InfoState{Started: i.Started.UTC().Format(time.RFC3339Nano), ElapsedNs: int64(i.Elapsed), Interrupted: i.Interrupted,
		Sent: i.Sent, Dropped: i.Dropped, CutAtEnd: i.CutAtEnd, GraceNs: int64(i.Grace),
		ScheduledFromNs: int64(i.Scheduled.From), ScheduledToNs: int64(i.Scheduled.To), StageScheduledNs: map[string]int64{},
		CPUUtilization: i.CPUUtilization, ShardIndex: i.Shard.Index, ShardCount: i.Shard.Count, LateStartNs: int64(i.LateStart),
		Preconnected: i.Preconnected, PreconnectConns: i.PreconnectConns, PreconnectNs: int64(i.PreconnectTime)}
	if i.Stopped != nil {
		s.Stopped = i.Stopped.Error()
	}
	for k, v := range i.StageScheduled {
		s.StageScheduledNs[k] = int64(v)
	}
	if !i.StartAt.IsZero() {
		s.StartAt = i.StartAt.UTC().Format(time.RFC3339Nano)
	}
	if i.PreconnectErr != nil {
		s.PreconnectErr = i.PreconnectErr.Error()
	}
	if i.Host.WindowS > 0 {
		h := i.Host
		s.Host = &h
	}
	return s
}

// InfoFromState rebuilds the Info a state was taken of (Stopped and PreconnectErr
// as plain errors of their text).
func InfoFromState(s schema.InfoState) (Info, error) {
	started, err := time.Parse(time.RFC3339Nano, s.Started)
	if err != nil {
		return Info{}, fmt.Errorf("started %q: %w", s.Started, err)
	}
	i := Info{Started: started, Elapsed: time.Duration(s.ElapsedNs), Interrupted: s.Interrupted,
		Sent: s.Sent, Dropped: s.Dropped, CutAtEnd: s.CutAtEnd, Grace: time.Duration(s.GraceNs),
		Scheduled:      Window{From: time.Duration(s.ScheduledFromNs), To: time.Duration(s.ScheduledToNs)},
		StageScheduled: map[string]time.Duration{}, CPUUtilization: s.CPUUtilization,
		Shard: Shard{Index: s.ShardIndex, Count: s.ShardCount}, LateStart: time.Duration(s.LateStartNs),
		Preconnected: s.Preconnected, PreconnectConns: s.PreconnectConns, PreconnectTime: time.Duration(s.PreconnectNs)}
	if s.Host != nil {
		i.Host = *s.Host
	}
	if s.Stopped != "" {
		i.Stopped = errors.New(s.Stopped)
	}
	if s.PreconnectErr != "" {
		i.PreconnectErr = errors.New(s.PreconnectErr)
	}
	for k, v := range s.StageScheduledNs {
		i.StageScheduled[k] = time.Duration(v)
	}
	if s.StartAt != "" {
		if i.StartAt, err = time.Parse(time.RFC3339Nano, s.StartAt); err != nil {
			return Info{}, fmt.Errorf("start_at %q: %w", s.StartAt, err)
		}
	}
	return i, nil
}
