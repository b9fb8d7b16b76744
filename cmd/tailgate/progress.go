package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/tailgate-llm/tailgate/pipeline"
)

// progressBar draws a run's progress on a terminal: elapsed of total with
// an ETA, what was sent, what is in flight, errors and the TTFT p99 so far.
// It clears its line when the run ends, so the report after it starts on a
// clean line.
type progressBar struct {
	w     io.Writer
	label string
	bar   *progressbar.ProgressBar
}

// newProgress draws on w (a terminal); label names the run or stage
// ("stage peak 2/3").
func newProgress(w io.Writer, label string) pipeline.Progress {
	return &progressBar{w: w, label: label}
}

// progress ticks in tenths of a second of schedule.
const progressUnit = 100 * time.Millisecond

func (p *progressBar) Update(s pipeline.ProgressState) {
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(max(2, int64(s.Total/progressUnit)),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(0),
		)
	}
	inFlight := max(0, s.Sent-s.Done)
	ttft := "-" // no token yet: nothing to show, not zero
	if s.HasTTFT {
		ttft = fmt.Sprintf("%.1f ms", float64(s.TTFTP99)/float64(time.Millisecond))
	}
	desc := fmt.Sprintf("sent %d  in flight %d  errors %d  p99 TTFT %s", s.Sent, inFlight, s.Failed, ttft)
	if s.Elapsed >= s.Total {
		desc = fmt.Sprintf("draining: %d in flight  sent %d  errors %d", inFlight, s.Sent, s.Failed)
	}
	if p.label != "" {
		desc = p.label + "  " + desc
	}
	p.bar.Describe(desc)
	// Hold the bar short of full until the run has ended: full finishes it.
	p.bar.Set64(min(int64(s.Elapsed/progressUnit), p.bar.GetMax64()-1))
}

func (p *progressBar) Finish() {
	if p.bar == nil {
		return
	}
	p.bar.Finish()
	p.bar.Clear()
}
