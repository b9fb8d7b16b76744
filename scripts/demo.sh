#!/usr/bin/env bash
# make demo: start the built-in simulator on a free loopback port, replay a
# prompt mix against it, then run an acceptance validate; print the reports.
set -euo pipefail
BIN=${1:-bin/tailgate}
OUT=${DEMO_OUT:-demo-out}
rm -rf "$OUT"; mkdir -p "$OUT"

ready="$OUT/sim.url"
"$BIN" sim --addr 127.0.0.1:0 --ready-file "$ready" >"$OUT/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$ready" ] && break; sleep 0.1; done
[ -s "$ready" ] || { echo "demo: simulator did not start; see $OUT/sim.log" >&2; cat "$OUT/sim.log" >&2; exit 1; }
url=$(cat "$ready")
echo "== simulator listening on $url"

echo "== tailgate run: a production-like chat mix, Poisson arrivals at 8 req/s for 15 s"
"$BIN" run --target "$url" --mix testdata/mixes/chat.yaml --rate 8 --duration 15s --warmup 2s --out "$OUT/run"

echo
echo "== tailgate validate: acceptance plan testdata/plans/demo.yaml (normal and peak stages, one waiver, one manual stage)"
set +e
"$BIN" validate --plan testdata/plans/demo.yaml --target "$url" --out "$OUT/validate"
code=$?
set -e
echo "(validate exit code $code: 0 all passed or waived, 1 an objective failed, 3 run invalid, 4 a sample too small to decide)"
[ "$code" -le 1 ] || [ "$code" -eq 4 ] || exit "$code"

echo
echo "== tailgate check: re-evaluate the saved results without re-running"
set +e
"$BIN" check --slo testdata/slo/chat.yaml "$OUT/validate" >"$OUT/check.txt"
c=$?
tail -n 1 "$OUT/check.txt"
echo "(check exit code $c; validate's was $code)"
set -e
# One judgement: re-judging the saved results gives the run's verdict.
[ "$c" -eq "$code" ] || { echo "demo: check exit $c differs from validate exit $code" >&2; exit 1; }

echo
echo "== sign the evidence pack and verify it"
"$BIN" sign --keygen --key "$OUT/demo.key" --pub "$OUT/demo.pub" >/dev/null
"$BIN" sign --key "$OUT/demo.key" "$OUT/validate"
"$BIN" verify --pub "$OUT/demo.pub" "$OUT/validate"

echo
echo "== tailgate sweep: capacity review, three load levels (90% targets: short levels decide them), report.html"
cat >"$OUT/sweep-slo.yaml" <<'EOF2'
kind: SLO
name: demo-sweep
owner: demo
objectives:
  - {name: ttft-p90, metric: ttft, threshold: 500ms, target: 90%}
  - {name: tpot-p90, metric: tpot, threshold: 40ms, target: 90%}
  - {name: errors, metric: error_rate, threshold: 10%}
EOF2
set +e
"$BIN" sweep --target "$url" --slo "$OUT/sweep-slo.yaml" --levels 4,8,16 --arrival constant --max-tokens 32 \
  --warmup 1s --min-duration 5s --grace 5s --out "$OUT/sweep"
s=$?
set -e
echo "(sweep exit code $s: 0 an SLO-max was found, 1 none)"
[ "$s" -le 1 ] || exit "$s"

echo
echo "== tailgate canary: operate, probing the simulator for a few seconds; its /status"
cat >"$OUT/canary.yaml" <<EOF2
kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
evaluation_interval: 2s
slo: $PWD/testdata/slo/chat.yaml
targets:
  - name: sim
    url: $url
    model: sim-llama-8b
    max_tokens: 16
    schedule: {rate: 2}
EOF2
"$BIN" canary --config "$OUT/canary.yaml" >"$OUT/canary.log" 2>&1 &
canary=$!
addr=""
for _ in $(seq 1 50); do
  addr=$(sed -n 's/.*serving .* on \([0-9.:]*\);.*/\1/p' "$OUT/canary.log" | head -1)
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "demo: the canary did not start; see $OUT/canary.log" >&2; cat "$OUT/canary.log" >&2; kill $canary; exit 1; }
sleep 5
if command -v curl >/dev/null 2>&1; then
  curl -s "http://$addr/status" >"$OUT/canary-status.json"
else
  echo "(no curl: /status not fetched)" >"$OUT/canary-status.json"
fi
kill -TERM $canary
wait $canary || { echo "demo: the canary did not shut down cleanly; see $OUT/canary.log" >&2; exit 1; }
grep -o '"name":"[^"]*","metric":"[^"]*"' "$OUT/canary-status.json" | head -3 || true
echo "(canary /status saved in $OUT/canary-status.json; its log in $OUT/canary.log)"

echo
echo "== reports"
echo "run:       $OUT/run/summary.json"
echo "validate:  $OUT/validate/report.html (signed: $OUT/validate/manifest.dsse.json)"
echo "sweep:     $OUT/sweep/report.html"
echo "canary:    $OUT/canary-status.json"
