package ollamatest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestStart: the server answers, has both models, streams a chat answer
// from Tiny that runs to its token limit, and stops.
func TestStart(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{NumParallel: 2})
	resp, err := http.Get(s.URL + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	var tags struct{ Models []struct{ Name string } }
	json.NewDecoder(resp.Body).Decode(&tags)
	resp.Body.Close()
	var names []string
	for _, m := range tags.Models {
		names = append(names, m.Name)
	}
	if j := strings.Join(names, ","); !strings.Contains(j, Tiny+":latest") || !strings.Contains(j, TinyEOS+":latest") {
		t.Fatalf("models %v", names)
	}
	body := `{"model":"tiny","messages":[{"role":"user","content":"Write a short story about a lighthouse keeper."}],"options":{"num_predict":12}}`
	resp, err = http.Post(s.URL+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var chunks int
	var last map[string]any
	var text bytes.Buffer
	for sc.Scan() {
		var o struct {
			Message struct{ Content string }
			Done    bool
		}
		json.Unmarshal(sc.Bytes(), &o)
		if o.Message.Content != "" {
			chunks++
			text.WriteString(o.Message.Content)
		}
		if o.Done {
			json.Unmarshal(sc.Bytes(), &last)
		}
	}
	t.Logf("answer %q; final %v", text.String(), last)
	if last == nil || last["done_reason"] != "length" || last["eval_count"] != float64(12) || chunks != 12 {
		t.Fatalf("%d chunks, final %v: want 12 chunks to the length limit", chunks, last)
	}
	if r, all := s.Runner(Tiny), s.Runners(); r == 0 || len(all) != 2 || s.Runner(TinyEOS) == r {
		t.Errorf("runners %v, tiny's %d: want one per model", all, r)
	}
	s.Stop()
	if _, err := http.Get(s.URL + "/api/version"); err == nil {
		t.Error("server still answers after Stop")
	}
}
