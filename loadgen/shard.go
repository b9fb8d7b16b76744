package loadgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is one of Count processes that share one schedule. Every shard
// builds the whole schedule — the same arrivals from the same seed, the
// same prompt stream from the same mix — and sends only the requests whose
// global sequence number is ≡ Index (mod Count), so the union of the
// shards' requests is exactly the single-process schedule: the same
// intended starts and the same prompts, with the same Seq. Generating the
// skipped requests costs each shard CPU (the schedule and the prompts are
// drawn N times in all), but nothing has to be coordinated at run time.
//
// Closed loop: worker w (0-based, of the stage's concurrency) runs in the
// shard w mod Count, and each shard takes its prompts at the sequence
// numbers it owns. A closed loop has no schedule (intended start = send),
// so only the counts and the prompts are shared.
//
// Sessions: a session belongs to the shard of its first turn, and its
// later turns (due after an answer, which no schedule knows) are numbered
// from followUpSeqBase in that shard, so sequence numbers stay unique
// across shards.
//
// The zero value (Count 0) and Count 1 mean no sharding.
type Shard struct {
	Index int // 0-based, as a Kubernetes Indexed Job's completion index
	Count int
}

// followUpSeqBase is where a sharded run numbers session turns after the
// first: Seq = followUpSeqBase + k·Count + Index for the shard's k-th.
const followUpSeqBase = int64(1) << 40

// ParseShard reads "I/N": shard I (0-based) of N.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want I/N, e.g. 0/4 (I is 0-based)", s)
	}
	idx, err1 := strconv.Atoi(strings.TrimSpace(i))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want whole numbers I/N, e.g. 0/4", s)
	}
	sh := Shard{Index: idx, Count: cnt}
	return sh, sh.Validate()
}

// Validate says what is wrong with the shard, if anything.
func (s Shard) Validate() error {
	switch {
	case s.Count == 0 && s.Index == 0:
		return nil
	case s.Count < 1:
		return fmt.Errorf("shard %d/%d: the count must be ≥ 1", s.Index, s.Count)
	case s.Index < 0 || s.Index >= s.Count:
		return fmt.Errorf("shard %d/%d: the index must be 0 to %d (0-based)", s.Index, s.Count, s.Count-1)
	}
	return nil
}

// Active reports whether the schedule is split (Count > 1).
func (s Shard) Active() bool { return s.Count > 1 }

// Owns reports whether global sequence number (or closed-loop worker)
// seq is this shard's.
func (s Shard) Owns(seq int64) bool {
	return !s.Active() || seq%int64(s.Count) == int64(s.Index)
}

// Share is how many of the numbers 0 … n−1 the shard owns.
func (s Shard) Share(n int64) int64 {
	if !s.Active() {
		return n
	}
	if n <= int64(s.Index) {
		return 0
	}
	return (n-int64(s.Index)-1)/int64(s.Count) + 1
}

// String is "I/N" ("" for the zero value).
func (s Shard) String() string {
	if s.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}
