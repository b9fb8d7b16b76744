package loadgen

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

func TestParseShard(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want Shard
		err  bool
	}{
		{"0/1", Shard{0, 1}, false}, {"2/4", Shard{2, 4}, false}, {" 3 / 4 ", Shard{3, 4}, false},
		{"4/4", Shard{}, true}, {"-1/4", Shard{}, true}, {"1/0", Shard{}, true}, {"1", Shard{}, true}, {"a/b", Shard{}, true},
	} {
		got, err := ParseShard(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseShard(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
	if got := (Shard{1, 4}).Share(10); got != 3 { // 1, 5, 9
		t.Errorf("Share(10) of 1/4 = %d, want 3", got)
	}
	if got := (Shard{3, 4}).Share(3); got != 0 {
		t.Errorf("Share(3) of 3/4 = %d, want 0", got)
	}
}

// classSource draws a class and a text from a seeded generator: the same
// stream in every process, as a mix's is.
type classSource struct{ n int }

func (s *classSource) Next() (*prompts.Prompt, error) {
	s.n++
	cls := "a"
	if (s.n*2654435761)%7 < 3 {
		cls = "b"
	}
	return &prompts.Prompt{ID: fmt.Sprintf("p%d", s.n), Class: cls, Text: fmt.Sprintf("text %d", s.n*31)}, nil
}

type sent struct {
	seq      int64
	id, cls  string
	intended time.Duration
	stage    string
}

// runShard runs one shard against an instant client and returns what it
// sent, sorted by seq.
func runShard(t *testing.T, opts Options) ([]sent, Info) {
	t.Helper()
	c := &fakeClient{ttft: time.Millisecond, itl: time.Millisecond, tokens: 2}
	r, err := NewRunner(c, &classSource{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *Record, 1024)
	var got []sent
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rec := range out {
			got = append(got, sent{rec.Seq, rec.ID, rec.Class, rec.Intended, rec.Stage})
		}
	}()
	info, err := r.Run(context.Background(), out)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].seq < got[j].seq })
	return got, info
}

// The union of N shards' requests is the single process's schedule: the
// same sequence numbers, prompts, classes, stages and intended starts, for
// a Poisson schedule with ramps and stages, a request cap and a warm-up.
func TestShardsUnionIsTheSchedule(t *testing.T) {
	t.Parallel()
	base := Options{Stages: []Stage{{Name: "s1", Rate: 150, Duration: 300 * time.Millisecond},
		{Name: "s2", Rate: 300, Duration: 300 * time.Millisecond, Ramp: 100 * time.Millisecond}},
		Arrival: ArrivalPoisson, Seed: 42, Requests: 120, WarmupRequests: 5, Grace: time.Second}
	var whole []sent
	synctest.Test(t, func(t *testing.T) { whole, _ = runShard(t, base) })
	if len(whole) != 120 {
		t.Fatalf("single process sent %d requests, want the cap of 120", len(whole))
	}
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now().Add(50 * time.Millisecond)
				parts := make([][]sent, n)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						o := base
						o.Shard, o.StartAt = Shard{Index: i, Count: n}, start
						var info Info
						parts[i], info = runShard(t, o)
						if info.Shard != o.Shard || info.LateStart != 0 {
							t.Errorf("shard %d: info says shard %v, late %v", i, info.Shard, info.LateStart)
						}
						if d := info.Started.Sub(start); d != 0 {
							t.Errorf("shard %d started at %v, %v from --start-at", i, info.Started, d)
						}
						for _, s := range parts[i] {
							if s.seq%int64(n) != int64(i) {
								t.Errorf("shard %d/%d sent seq %d", i, n, s.seq)
							}
						}
					}()
				}
				wg.Wait()
				var union []sent
				for _, p := range parts {
					union = append(union, p...)
				}
				sort.Slice(union, func(i, j int) bool { return union[i].seq < union[j].seq })
				if len(union) != len(whole) {
					t.Fatalf("shards sent %d requests together, single process %d", len(union), len(whole))
				}
				for i := range whole {
					if union[i] != whole[i] {
						t.Fatalf("request %d: shards sent %+v, single process %+v", i, union[i], whole[i])
					}
				}
			})
		})
	}
}

// Closed loop: the workers and the request cap are split, and the shards'
// prompts together are the single process's first ones.
func TestShardsClosedLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := Options{Closed: true, Stages: []Stage{{Name: "c", Concurrency: 5, Duration: 2 * time.Second}}, Requests: 40}
		whole, _ := runShard(t, base)
		var union []sent
		for i := 0; i < 3; i++ {
			o := base
			o.Shard = Shard{Index: i, Count: 3}
			part, _ := runShard(t, o)
			if want := (Shard{i, 3}).Share(40); int64(len(part)) != want {
				t.Errorf("shard %d/3 sent %d, want %d", i, len(part), want)
			}
			union = append(union, part...)
		}
		sort.Slice(union, func(i, j int) bool { return union[i].seq < union[j].seq })
		if len(union) != len(whole) {
			t.Fatalf("shards sent %d, single process %d", len(union), len(whole))
		}
		for i := range whole {
			if union[i].seq != whole[i].seq || union[i].id != whole[i].id || union[i].cls != whole[i].cls {
				t.Fatalf("request %d: shards %+v, single %+v", i, union[i], whole[i])
			}
		}
	})
}

// A shard that begins after --start-at keeps it as its epoch and says how
// late it was; its first requests are charged the lateness.
func TestLateStartSaysByHowMuch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := Options{Stages: []Stage{{Name: "s", Rate: 100, Duration: 200 * time.Millisecond}},
			Arrival: ArrivalConstant, StartAt: time.Now().Add(-50 * time.Millisecond)}
		got, info := runShard(t, o)
		if info.LateStart != 50*time.Millisecond {
			t.Fatalf("LateStart %v, want 50ms", info.LateStart)
		}
		if len(got) != 20 {
			t.Errorf("sent %d, want the 20 the schedule makes due", len(got))
		}
	})
}

// Preconnect runs before the epoch: its time is reported apart and is in
// no request's latency; with a distant StartAt it runs just before it.
func TestPreconnectBeforeTheEpoch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calledAt time.Time
		o := Options{Stages: []Stage{{Name: "s", Rate: 50, Duration: 100 * time.Millisecond}}, Arrival: ArrivalConstant,
			Preconnect: func(context.Context) (int, error) {
				calledAt = time.Now()
				time.Sleep(150 * time.Millisecond) // the fake clock: a 150 ms preconnect
				return 3, nil
			}}
		got, info := runShard(t, o)
		if !info.Preconnected || info.PreconnectConns != 3 || info.PreconnectTime != 150*time.Millisecond {
			t.Fatalf("info: preconnected %v, %d connections in %v", info.Preconnected, info.PreconnectConns, info.PreconnectTime)
		}
		if !info.Started.Equal(calledAt.Add(150 * time.Millisecond)) {
			t.Errorf("the epoch %v is not at the preconnect's end (%v + 150ms)", info.Started, calledAt)
		}
		if len(got) != 5 || got[0].intended != 0 {
			t.Errorf("sent %d, first intended %v", len(got), got[0].intended)
		}
		// The lead grows with the pool: 16,384 connections open earlier
		// than one, and both open after a StartAt far enough ahead.
		for _, conns := range []int{1, 16384} {
			start := time.Now().Add(30 * time.Second)
			o.StartAt, o.PreconnectConns = start, conns
			o.Preconnect = func(context.Context) (int, error) { calledAt = time.Now(); return conns, nil }
			runShard(t, o)
			want := 2*time.Second + time.Duration(conns)*250*time.Microsecond
			if lead := start.Sub(calledAt); lead != want {
				t.Errorf("%d connections: preconnect ran %v before --start-at, want %v", conns, lead, want)
			}
		}
	})
}
