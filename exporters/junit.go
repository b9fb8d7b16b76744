package exporters

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/tailgate-llm/tailgate/slo"
)

// JUnit XML in the Ant/Jenkins form that CI servers read: one <testsuite>
// per stage, one <testcase> per objective × stage. A failed objective is a
// <failure>; a waived one is <skipped message="waived by OWNER until DATE:
// REASON"/> and is also listed in the suite's properties with its
// underlying result; an objective with no data is an <error> (the run is
// invalid); a manual stage nobody recorded yet is a <failure>.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Failure   *junitMessage `xml:"failure"`
	Error     *junitMessage `xml:"error"`
	SystemOut *junitText    `xml:"system-out"`
}

// junitText is element text written as CDATA, so multi-line details stay
// readable.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"`
}

// WriteJUnit writes r as JUnit XML.
func WriteJUnit(w io.Writer, r *slo.Report) error {
	name := "tailgate"
	if r.Plan != "" {
		name += "." + r.Plan
	}
	root := junitSuites{Name: name}
	var total float64
	for _, st := range r.Stages {
		// A stage's timestamp is when it ran (a manual one: when its
		// result was recorded), not when it was judged: --record and
		// check judge again later.
		at := r.EvaluatedAt
		switch {
		case !st.Started.IsZero():
			at = st.Started
		case st.ManualResult != nil && !st.ManualResult.At.IsZero():
			at = st.ManualResult.At
		}
		ts := at.UTC().Format("2006-01-02T15:04:05")
		s := junitSuite{Name: st.Name, Time: seconds(st.WindowS), Timestamp: ts}
		total += st.WindowS
		s.Properties = append(s.Properties, junitProperty{"tailgate.slo", r.SLO})
		if st.Manual {
			s.Properties = append(s.Properties, junitProperty{"tailgate.stage.manual", "true"})
		} else {
			c := st.Counts
			s.Properties = append(s.Properties, junitProperty{"tailgate.stage.requests",
				fmt.Sprintf("%d (ok %d, failed %d, dropped %d, cut at end %d, warm-up %d)", c.Requests, c.OK, c.Failed, c.Dropped, c.CutAtEnd, c.Warmup)})
		}
		for _, p := range r.Problems {
			if p.Stage == st.Name {
				s.Properties = append(s.Properties, junitProperty{"tailgate.invalid." + p.Check, p.Detail})
			}
		}
		for i := range r.Verdicts {
			v := &r.Verdicts[i]
			if v.Stage != st.Name {
				continue
			}
			s.Tests++
			c := junitCase{Name: caseName(v), Classname: name + "." + st.Name, Time: "0", SystemOut: &junitText{detail(v)}}
			switch v.Status {
			case slo.Fail, slo.Pending, slo.Inconclusive: // INCONCLUSIVE: the note says how many would decide it
				s.Failures++
				c.Failure = &junitMessage{Message: summaryLine(v), Type: "slo." + string(v.Status), Body: detail(v)}
				c.SystemOut = nil
			case slo.NoData:
				s.Errors++
				c.Error = &junitMessage{Message: "no data: " + v.Note, Type: "slo.NO_DATA"}
			case slo.NotApplicable:
				s.Skipped++
				c.Skipped = &junitMessage{Message: v.Note}
			case slo.Waived:
				s.Skipped++
				c.Skipped = &junitMessage{Message: v.Waiver.Describe()}
				s.Properties = append(s.Properties, junitProperty{"tailgate.waived." + caseName(v),
					fmt.Sprintf("%s; result %s: %s", v.Waiver.Describe(), v.Result, summaryLine(v))})
			}
			if v.WaiverExpired {
				s.Properties = append(s.Properties, junitProperty{"tailgate.waiver_expired." + caseName(v),
					fmt.Sprintf("waiver by %s expired %s: %s", v.Waiver.Owner, v.Waiver.ExpiresText, v.Waiver.Reason)})
			}
			s.Cases = append(s.Cases, c)
		}
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
		root.Suites = append(root.Suites, s)
	}
	root.Time = seconds(total)
	ew := &errWriter{w: w}
	io.WriteString(ew, xml.Header)
	enc := xml.NewEncoder(ew)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	io.WriteString(ew, "\n")
	return ew.err
}

func caseName(v *slo.Verdict) string {
	if v.Kind == slo.KindManual {
		return "manual"
	}
	return v.Objective
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }

// summaryLine is one line on a verdict: "ttft 98% ≤ 500ms, target 99%
// (p99 612ms)".
func summaryLine(v *slo.Verdict) string {
	switch v.Kind {
	case slo.KindLatency:
		return fmt.Sprintf("%s: %s of events %s, target %s", v.Metric, v.MeasuredText(), v.ThresholdLabel(), v.TargetText)
	case slo.KindRatio:
		return fmt.Sprintf("%s: %s, threshold %s", v.Metric, v.MeasuredText(), v.ThresholdLabel())
	case slo.KindFloor:
		return fmt.Sprintf("%s: %s, threshold %s", v.Metric, v.MeasuredText(), v.ThresholdLabel())
	case slo.KindManual:
		if v.Result == slo.Pending {
			return "manual stage not recorded yet"
		}
		return "manual stage recorded as " + strings.ToLower(string(v.Result))
	}
	return string(v.Metric)
}

func detail(v *slo.Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "objective %s, stage %s", v.Objective, v.Stage)
	if v.Class != "" {
		fmt.Fprintf(&b, ", class %s", v.Class)
	}
	fmt.Fprintf(&b, "\n%s\n", summaryLine(v))
	switch v.Kind {
	case slo.KindLatency, slo.KindRatio:
		fmt.Fprintf(&b, "good %d of %d\n", v.Good, v.Total)
		if v.LeftOut > 0 {
			fmt.Fprintf(&b, "left out %d (not failures of the server)\n", v.LeftOut)
		}
		switch v.QuantileFrom {
		case slo.QuantileFromHDR:
			b.WriteString("quantile from an HDR histogram (3 significant digits); the result from exact counts\n")
		case slo.QuantileFromBuckets:
			b.WriteString("quantile from server histogram buckets\n")
		}
	case slo.KindFloor:
		fmt.Fprintf(&b, "counted %d over %.3fs\n", v.Good, v.WindowS)
	}
	if v.Source != "" {
		fmt.Fprintf(&b, "source: %s\n", v.Source)
	}
	if v.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", v.Note)
	}
	return b.String()
}
