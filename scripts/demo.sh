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
