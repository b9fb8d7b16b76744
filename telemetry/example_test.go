package telemetry_test

import (
	"fmt"
	"strings"

	"github.com/tailgate-llm/tailgate/telemetry"
)

func ExampleParseExposition() {
	text := `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 3
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{model_name="m",le="0.3"} 80
vllm:request_queue_time_seconds_bucket{model_name="m",le="0.5"} 90
vllm:request_queue_time_seconds_bucket{model_name="m",le="+Inf"} 100
vllm:request_queue_time_seconds_sum{model_name="m"} 21
vllm:request_queue_time_seconds_count{model_name="m"} 100
`
	s, err := telemetry.ParseExposition(strings.NewReader(text))
	if err != nil {
		panic(err)
	}
	p50, _ := s.QueueDelay.Quantile(0.5)
	p90, _ := s.QueueDelay.Quantile(0.9)
	fmt.Println(s.Family, *s.Waiting, s.QueueDelay.Count)
	fmt.Printf("p50 %.4f s in (%v, %v]\n", p50.Value, p50.Lower, p50.Upper)
	fmt.Printf("p90 %.4f s in (%v, %v]\n", p90.Value, p90.Lower, p90.Upper)
	// Output:
	// vllm 3 100
	// p50 0.1875 s in (0, 0.3]
	// p90 0.5000 s in (0.3, 0.5]
}
