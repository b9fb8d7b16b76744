package loadgen

import (
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	trace := Options{Trace: true, Arrival: ArrivalPoisson, Stages: []Stage{{Name: "trace", Duration: 10890 * time.Millisecond}}}
	d := trace.Describe()
	if _, ok := d["arrival"]; ok || d["mode"] != "trace" || d["stages"] != "trace@10.89s" {
		t.Errorf("trace replay described as %v: no arrival process and no rate", d)
	}
	open := Options{Arrival: ArrivalGamma, Burstiness: 0.5, Stages: []Stage{{Rate: 10, Duration: time.Minute}, {Rate: 50, Duration: 2 * time.Minute, Ramp: 20 * time.Second}}}
	d = open.Describe()
	if d["mode"] != "open" || d["arrival"] != "gamma" || d["burstiness"] != 0.5 || d["stages"] != "10@1m0s,50@2m0s~20s" {
		t.Errorf("open loop described as %v", d)
	}
	closed := Options{Closed: true, Arrival: ArrivalPoisson, Stages: []Stage{{Concurrency: 8, Duration: time.Second}}}
	if d = closed.Describe(); d["mode"] != "closed" || d["stages"] != "c8@1s" || d["arrival"] != nil {
		t.Errorf("closed loop described as %v", d)
	}
}
