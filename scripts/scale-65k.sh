#!/bin/sh
# scale-65k.sh: 65,536 concurrent streams on one machine as four shards of
# 16,384, each shard its own client process against its own simulator
# process on its own loopback address (so neither process passes its
# open-file limit and no address pair runs out of ephemeral ports), the
# shards started together (--start-at) and merged (tailgate merge).
# Prints every process's peak RSS, each shard's and the merged counts, and
# whether every request was ok. Bounded: the clients run under timeout and
# everything started here is stopped on exit.
#
# Environment: BIN (bin/tailgate), SHARDS (4), PER (16384 streams a shard),
# DUR (30s), TOKENS (16 a stream), ITL (1s between tokens), OUT (a
# fresh directory under /tmp).
set -eu
BIN=${BIN:-bin/tailgate}
SHARDS=${SHARDS:-4}
PER=${PER:-16384}
DUR=${DUR:-30s}
TOKENS=${TOKENS:-16}
ITL=${ITL:-1s}
OUT=${OUT:-$(mktemp -d /tmp/scale-65k.XXXXXX)}
TOTAL=$((SHARDS * PER))
mkdir -p "$OUT"

sims=""
clients=""
cleanup() {
	for p in $clients $sims; do
		# the clients run under /usr/bin/time: stop its child too
		for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
		kill "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr() { echo "127.0.0.$(($1 + 2)):8000"; }

i=0
while [ "$i" -lt "$SHARDS" ]; do
	"$BIN" sim --mode fixed --fixed-ttft 50ms --fixed-itl "$ITL" --default-max-tokens "$TOKENS" \
		--addr "$(addr $i)" --ready-file "$OUT/sim$i.ready" >"$OUT/sim$i.log" 2>&1 &
	sims="$sims $!"
	i=$((i + 1))
done
i=0
while [ "$i" -lt "$SHARDS" ]; do
	n=0
	until [ -s "$OUT/sim$i.ready" ]; do
		n=$((n + 1))
		[ "$n" -le 100 ] || { echo "sim $i did not listen: $(cat "$OUT/sim$i.log")" >&2; exit 1; }
		sleep 0.1
	done
	i=$((i + 1))
done

# Every shard starts its schedule at one instant, after its preconnect.
start=$(date -u -d "@$(($(date +%s) + 10))" +%Y-%m-%dT%H:%M:%SZ)
echo "$TOTAL streams: $SHARDS shards of $PER, $TOKENS tokens at $ITL, $DUR from $start; results in $OUT"
t0=$(date +%s)
i=0
while [ "$i" -lt "$SHARDS" ]; do
	/usr/bin/time -v -o "$OUT/client$i.time" timeout 150 "$BIN" run --target http://127.0.0.1:8000 \
		--connect-to "$(addr $i)" --model sim-llama-8b --shard "$i/$SHARDS" --concurrency "$TOTAL" \
		--duration "$DUR" --grace 45s --preconnect --start-at "$start" --max-tokens "$TOKENS" \
		--records compact --no-progress --out "$OUT/shard$i" >"$OUT/client$i.log" 2>&1 &
	clients="$clients $!"
	i=$((i + 1))
done
rc=0
for p in $clients; do wait "$p" || rc=1; done
clients=""
t1=$(date +%s)
echo "clients done in $((t1 - t0)) s (exit $rc); load average $(cut -d' ' -f1-3 /proc/loadavg)"

i=0
for p in $sims; do
	echo "sim $i ($(addr $i)) peak RSS $(awk '/VmHWM/ {print $2, $3}' "/proc/$p/status")"
	i=$((i + 1))
done
i=0
while [ "$i" -lt "$SHARDS" ]; do
	echo "client $i peak RSS $(awk -F': ' '/Maximum resident/ {print $2}' "$OUT/client$i.time") kB, exit $(awk -F': ' '/Exit status/ {print $2}' "$OUT/client$i.time")"
	i=$((i + 1))
done

counts() { jq -r '"\(.requests.sent) sent, \(.requests.ok) ok, \(.requests.errors) errors, \(.requests.cut_at_end) cut at end"' "$1/summary.json"; }
shards=""
i=0
while [ "$i" -lt "$SHARDS" ]; do
	echo "shard $i: $(counts "$OUT/shard$i")"
	shards="$shards $OUT/shard$i"
	i=$((i + 1))
done
# shellcheck disable=SC2086
"$BIN" merge --out "$OUT/merged" $shards >"$OUT/merge.log" 2>&1 || rc=1
echo "merged: $(counts "$OUT/merged")"
exit "$rc"
