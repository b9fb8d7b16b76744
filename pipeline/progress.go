package pipeline

import "time"

// Progress is told how a run goes once a second, and that it ended. The
// command draws it (cmd/tailgate's terminal bar): the library holds no
// terminal code, and a test or another front end may watch a run the same
// way.
type Progress interface {
	Update(ProgressState)
	// Finish is called once, when the run has ended, before its report.
	Finish()
}

// ProgressState is a run's state at one tick.
type ProgressState struct {
	Elapsed, Total     time.Duration // of the schedule; Elapsed past Total while draining
	Sent, Done, Failed int64
	// TTFTP99 is the TTFT p99 so far; HasTTFT is false before the first
	// token, when there is none to show.
	TTFTP99 time.Duration
	HasTTFT bool
}
