package capacity

import (
	"time"
)

// A server of 8 slots, each request holding one for a fixed 195 ms
// (fixed-delay simulator, 8 HTTP threads: the others wait for a free one),
// serves at most 8 / 0.195 s = 41.0 req/s. Constant arrivals below that
// never queue, so E2E stays at 195 ms; above it the backlog grows by the
// excess every second, and within a level of 299 requests most wait far
// past 300 ms. The SLO (E2E ≤ 300 ms for 99%, errors ≤ 1%) therefore holds
// up to the capacity and fails above: the sweep's SLO-max must be within
// 10% of 41 req/s (and must not judge a level below capacity a FAIL and
// find none).
const (
	slotsN       = 8
	slotTTFT     = 150 * time.Millisecond
	slotITL      = 15 * time.Millisecond
	slotTokens   = 4 // 150 + 3 × 15 = 195 ms a request
	slotsDerived = slotsN / 0.195
)

const slotsSLO = `kind: SLO
name: slots
owner: capacity
objectives:
  - {name: e2e, metric: e2e, threshold: 300ms, target: 99%}
  - {name: errors, metric: error_rate, threshold: 1%}
`
