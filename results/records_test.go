package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
)

func TestReadRecordsTornTailAndLegacyKinds(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), RecordsFile)
	lines := `{"seq":0,"intended_us":0,"sent_us":1,"end_us":9,"input_tokens":0,"output_tokens":1,"error_kind":"http_429"}
{"seq":1,"intended_us":0,"sent_us":1,"end_us":9,"input_tokens":0,"output_tokens":1}

{"seq":2,"intended_us":0,"sent_us":1,"end_us":9,"inp`
	os.WriteFile(p, []byte(lines), 0o644)
	var kinds []loadgen.ErrorKind
	st, err := ReadRecords(p, func(r *loadgen.Record) error { kinds = append(kinds, r.ErrorKind); return nil })
	if err != nil || !st.TornTail || st.TornLine != 4 || st.Records != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	if kinds[0] != loadgen.ErrRateLimited || kinds[1] != loadgen.ErrNone {
		t.Errorf("kinds %v: the legacy http_429 must read as rate_limited", kinds)
	}
	// A complete but bad last line is an error, not a torn tail.
	os.WriteFile(p, []byte(lines+"\n"), 0o644)
	if _, err := ReadRecords(p, func(*loadgen.Record) error { return nil }); err == nil || !strings.Contains(err.Error(), RecordsFile+":4:") {
		t.Errorf("err %v", err)
	}
	// fn's error stops the read.
	stop := errors.New("stop")
	if _, err := ReadRecords(p, func(*loadgen.Record) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("err %v", err)
	}
}

func TestWriteErrorNamesThePath(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "no", "dir", SummaryFile)
	err := WriteJSON(p, 1)
	var we *WriteError
	if !errors.As(err, &we) || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("%v", err)
	}
}
