package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkStream measures how fast the zero-delay fixed mode streams: one
// op is one streamed token; tokens/s is what the server sent over the wall
// time, with conc clients reading SSE lines on the same machine.
func BenchmarkStream(b *testing.B) {
	for _, bc := range []struct {
		tpc, conc int
		truth     bool
	}{
		{1, 1, true}, {1, 4, true}, {1, 4, false}, {4, 4, true}, {16, 4, true},
	} {
		b.Run(fmt.Sprintf("tpc=%d/conc=%d/truth=%v", bc.tpc, bc.conc, bc.truth), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Mode = ModeFixed
			cfg.TokensPerChunk = bc.tpc
			cfg.TruthLimit = 100
			if !bc.truth {
				cfg.TruthLimit = -1
			}
			r := startSim(b, cfg)
			tr := &http.Transport{MaxIdleConnsPerHost: bc.conc, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			const perRequest = 4096
			raw, _ := json.Marshal(chatBody("benchmark prompt", perRequest, true, true))
			var left atomic.Int64
			left.Store(int64(b.N))
			var sent atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < bc.conc; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-perRequest) > -perRequest {
						resp, err := c.Post(r.URL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
						if err != nil {
							b.Error(err)
							return
						}
						br := bufio.NewReaderSize(resp.Body, 64<<10)
						events := 0
						for {
							line, err := br.ReadSlice('\n')
							if err != nil {
								break
							}
							if bytes.HasPrefix(line, []byte("data: ")) {
								events++
							}
						}
						resp.Body.Close()
						// role + chunks + finish + usage + [DONE]
						if want := 4 + (perRequest+bc.tpc-1)/bc.tpc; events != want {
							b.Errorf("%d events, want %d", events, want)
							return
						}
						sent.Add(perRequest)
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(sent.Load())/el.Seconds(), "tokens/s")
		})
	}
}
