package loadgen

import (
	"sync"

	"github.com/tailgate-llm/tailgate/prompts"
)

// sequencer draws prompts from the source and numbers them: the source's
// n-th prompt is Seq n in every shard (each shard draws the whole source,
// so the schedule stays the same), and a sharded run's session turns
// after the first are numbered from followUpSeqBase. Safe for the
// runner's goroutines: closed-loop workers and session turns draw
// concurrently.
type sequencer struct {
	mu    sync.Mutex
	src   Source
	shard Shard
	next  int64 // the number the source's next prompt gets
	// followUps counts a sharded run's session turns after the first.
	followUps int64
}

// peek is the number the source's next prompt gets.
func (s *sequencer) peek() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// draw takes the source's next prompt and its number.
func (s *sequencer) draw() (*prompts.Prompt, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.src.Next()
	seq := s.next
	if err == nil {
		s.next++
	}
	return p, seq, err
}

// drawOwned takes the next prompt this shard owns, passing over the
// other shards'.
func (s *sequencer) drawOwned() (*prompts.Prompt, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		p, err := s.src.Next()
		if err != nil {
			return nil, 0, err
		}
		seq := s.next
		s.next++
		if s.shard.Owns(seq) {
			return p, seq, nil
		}
	}
}

// turn numbers a session's next turn, which does not come from the
// source.
func (s *sequencer) turn() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.shard; sh.Active() {
		// Not from the source's numbering: when a turn is due depends on
		// an answer, and every shard must number the source alike.
		k := s.followUps
		s.followUps++
		return followUpSeqBase + k*int64(sh.Count) + int64(sh.Index)
	}
	s.next++
	return s.next - 1
}
