package pipeline

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Progress draws a live progress bar on a terminal: elapsed of total with
// an ETA, what was sent, what is in flight, errors and the TTFT p99 so far.
// It clears its line when the run ends, so the report after it starts on a
// clean line.
type Progress struct {
	w     io.Writer
	label string
	bar   *progressbar.ProgressBar
}

// NewProgress draws on w (a terminal); label names the run or stage
// ("stage peak 2/3").
func NewProgress(w io.Writer, label string) *Progress { return &Progress{w: w, label: label} }

// progress ticks in tenths of a second of schedule.
const progressUnit = 100 * time.Millisecond

func (p *Progress) update(elapsed, total time.Duration, sent, done, failed int64, m *loadgen.Metrics) {
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(max(2, int64(total/progressUnit)),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(0),
		)
	}
	p99 := float64(m.All.Hist[loadgen.MetricTTFT].ValueAtQuantile(99)) / 1000
	inFlight := max(0, sent-done)
	desc := fmt.Sprintf("sent %d  in flight %d  errors %d  p99 TTFT %.1f ms", sent, inFlight, failed, p99)
	if elapsed >= total {
		desc = fmt.Sprintf("draining: %d in flight  sent %d  errors %d", inFlight, sent, failed)
	}
	if p.label != "" {
		desc = p.label + "  " + desc
	}
	p.bar.Describe(desc)
	// Hold the bar short of full until the run has ended: full finishes it.
	p.bar.Set64(min(int64(elapsed/progressUnit), p.bar.GetMax64()-1))
}

func (p *Progress) finish() {
	if p.bar == nil {
		return
	}
	p.bar.Finish()
	p.bar.Clear()
}
