package sim

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// The pre-encoded responses decode to the messages textResponse builds.
func TestEncodedResponseMatchesProto(t *testing.T) {
	s := &Server{cfg: Config{Model: "m"}}
	for _, q := range []*kserveRequest{{exchange: &exchange{id: "r1", prompt: 7}, wantIn: true, wantOut: true}, {exchange: &exchange{}}, {exchange: &exchange{id: "x"}, wantOut: true}} {
		for _, final := range []bool{false, true} {
			for _, text := range []string{"", " the of", string(make([]byte, 300))} {
				b, _ := q.appendStreamResponse(nil, nil, q.responseHead("m"), q.prompt, []byte(text), 3, final)
				var got pb.ModelStreamInferResponse
				if err := proto.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
				want := &pb.ModelStreamInferResponse{InferResponse: q.textResponse(s, []byte(text), 3, final)}
				if !proto.Equal(&got, want) {
					t.Errorf("%+v final=%v %q:\n got %v\nwant %v", q, final, text, &got, want)
				}
			}
		}
	}
}
