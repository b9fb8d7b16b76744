package openai

import (
	"testing"

	"github.com/tailgate-llm/tailgate/prompts"
)

// The body without Params is byte for byte the map body encoding/json
// writes, for both APIs, streamed or not, awkward strings included.
func TestPlainBodyIsTheMapBody(t *testing.T) {
	ps := []*prompts.Prompt{
		{Text: "Write a short story about a lighthouse keeper."},
		{Text: `quotes " and \ back, <html> & co`},
		{Messages: []prompts.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "ünïcode ☃ \u2028 tab\t nl\n \x01 \xff"}}},
		{},
	}
	for _, api := range []string{APIChat, APICompletions} {
		for _, stream := range []bool{true, false} {
			for _, model := range []string{"", "m<1>"} {
				c := &Client{api: api, model: model, stream: stream, usage: true}
				for _, mt := range []int{0, 7} {
					for i, p := range ps {
						want, err := c.mapBody(p, mt)
						if err != nil {
							t.Fatal(err)
						}
						if got := c.plainBody(p, mt); string(got) != string(want) {
							t.Errorf("%s stream=%v model=%q max_tokens=%d prompt %d:\n got %s\nwant %s", api, stream, model, mt, i, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkRequestBody: the plain body against the map body it replaces,
// in the same run.
func BenchmarkRequestBody(b *testing.B) {
	c := &Client{api: APIChat, model: "meta-llama/Llama-3.1-8B-Instruct", stream: true, usage: true}
	p := &prompts.Prompt{Text: "Write a short story about a lighthouse keeper."}
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.mapBody(p, 128)
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.plainBody(p, 128)
		}
	})
}
