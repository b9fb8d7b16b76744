package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// timedChunks runs one request of max tokens through runOnTimer inside a
// synctest bubble (a fake clock: every instant exact) and returns each
// chunk's scheduled instant and the instant it was handed over, as offsets
// from arrival. hold is how long the consumer takes with each chunk.
func timedChunks(t *testing.T, cfg Config, j engineJob, hold time.Duration) (admitted time.Duration, at, handed []time.Duration) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		cfg.Mode = ModeFixed
		cfg.Tokenizer = TokenizerBytes4
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		j.arrived = time.Now()
		ok := s.runOnTimer(context.Background(), j, func(a time.Time) { admitted = a.Sub(j.arrived) },
			func(n int, a time.Time) bool {
				at = append(at, a.Sub(j.arrived))
				handed = append(handed, time.Since(j.arrived))
				time.Sleep(hold) // the consumer's own time with the chunk (a slow client)
				return true
			})
		if !ok {
			t.Error("runOnTimer did not finish")
		}
	})
	return admitted, at, handed
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestRunOnTimerExact(t *testing.T) {
	cfg := fixedCfg(20*time.Millisecond, 10*time.Millisecond)
	cfg.StallFor = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		j    engineJob
		hold time.Duration
		want []time.Duration // scheduled; handed over then too, unless held
	}{
		{"plain", engineJob{max: 5}, 0, []time.Duration{ms(20), ms(30), ms(40), ms(50), ms(60)}},
		{"stall", engineJob{max: 3, fault: FaultStall, faultFor: cfg.StallFor}, 0, []time.Duration{ms(120), ms(130), ms(140)}},
		// The pause runs before the chunk at mid, from the last chunk's flush.
		{"stall_mid", engineJob{max: 4, fault: FaultStallMid, faultFor: cfg.StallFor, mid: 2}, 0,
			[]time.Duration{ms(20), ms(30), ms(140), ms(150)}},
		// Deadlines are absolute: a consumer slower than the ITL gets the
		// next chunk at once (at 45, 70, 95 ms), and the schedule does not
		// drift.
		{"slow consumer", engineJob{max: 4}, 25 * time.Millisecond, []time.Duration{ms(20), ms(30), ms(40), ms(50)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adm, at, handed := timedChunks(t, cfg, tc.j, tc.hold)
			if adm != 0 {
				t.Errorf("admitted at +%v, want at arrival", adm)
			}
			if len(at) != len(tc.want) {
				t.Fatalf("chunks at %v, want %v", at, tc.want)
			}
			for i := range at {
				wantHanded := tc.want[i]
				if i > 0 {
					wantHanded = max(wantHanded, handed[i-1]+tc.hold)
				}
				if at[i] != tc.want[i] || handed[i] != wantHanded {
					t.Errorf("chunks at %v, handed over at %v; want at %v", at, handed, tc.want)
					break
				}
			}
		})
	}
}

// Jitter spreads each delay over [d−Jitter, d+Jitter], reproducibly (on a
// fake clock: over HTTP a late chunk shortens the next gap, which made the
// wall-clock version of this test fail on a loaded machine).
func TestRunOnTimerJitter(t *testing.T) {
	cfg := fixedCfg(10*time.Millisecond, 10*time.Millisecond)
	cfg.Jitter = 5 * time.Millisecond
	j := engineJob{max: 40, seqNo: 7}
	_, at, _ := timedChunks(t, cfg, j, 0)
	_, again, _ := timedChunks(t, cfg, j, 0)
	distinct := map[time.Duration]bool{}
	prev := time.Duration(0)
	for i, a := range at {
		gap := a - prev
		if gap < 5*time.Millisecond || gap > 15*time.Millisecond {
			t.Errorf("delay %d = %v, want within 10ms ± 5ms", i, gap)
		}
		distinct[gap] = true
		prev = a
		if again[i] != a {
			t.Errorf("chunk %d at %v, then %v with the same seed", i, a, again[i])
		}
	}
	if len(distinct) < 10 {
		t.Errorf("only %d distinct delays in %d", len(distinct), len(at))
	}
}
