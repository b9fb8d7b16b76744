package telemetry

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"
)

// sampleJSON is a Sample's line in telemetry.jsonl.
type sampleJSON struct {
	At     time.Time     `json:"at"`  // RFC 3339 with nanoseconds
	T      float64       `json:"t_s"` // seconds since the Run started
	Server *ServerSample `json:"server,omitempty"`
	GPUs   []GPUStat     `json:"gpus,omitempty"`
	Errors []string      `json:"errors,omitempty"`
	Late   []string      `json:"late,omitempty"`
}

// MarshalJSON writes one telemetry.jsonl line:
//
//	{"at":"2026-…Z","t_s":1.25,"server":{…},"gpus":[…],"errors":[…]}
//
// at is RFC 3339 with nanoseconds, t_s seconds since the Run started;
// server, gpus and errors are left out when empty. Keys are snake_case and
// only ever added to.
func (s Sample) MarshalJSON() ([]byte, error) {
	return json.Marshal(sampleJSON{At: s.At, T: math.Round(s.Elapsed.Seconds()*1e6) / 1e6,
		Server: s.Server, GPUs: s.GPUs, Errors: s.Errors, Late: s.Late})
}

// UnmarshalJSON reads what MarshalJSON writes (Elapsed to the microsecond).
func (s *Sample) UnmarshalJSON(data []byte) error {
	var v sampleJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = Sample{At: v.At, Elapsed: time.Duration(math.Round(v.T*1e6)) * time.Microsecond,
		Server: v.Server, GPUs: v.GPUs, Errors: v.Errors, Late: v.Late}
	return nil
}

// joinErrors joins messages on one line (errors.Join uses newlines, which
// a JSON-lines reader would rather not see).
func joinErrors(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
