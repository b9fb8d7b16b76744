#!/bin/sh
# make bench-peers: tailgate beside wrk, hey and a no-parse stream reader,
# all measured on this machine in one run, as one table of ratios (see
# bench/peers and docs/performance.md). wrk and hey are needed by the
# plain step only; this script installs nothing: without them it says what
# to install and stops, unless BENCH_STEPS leaves the plain step out.
set -eu
cd "$(dirname "$0")/.."
steps=${BENCH_STEPS:-plain,streamed,ttft,lag,memory,grpc}
case ",$steps," in
*,plain,*)
	need=""
	command -v wrk >/dev/null 2>&1 || need="$need wrk"
	command -v hey >/dev/null 2>&1 || need="$need hey"
	if [ -n "$need" ]; then
		echo "bench-peers: missing:$need (the plain step compares tailgate with them)." >&2
		echo "  Debian/Ubuntu: sudo apt-get install$need" >&2
		echo "  or: go install github.com/rakyll/hey@latest (hey); wrk from https://github.com/wg/wrk" >&2
		echo "  or run the other steps: make bench-peers BENCH_STEPS=streamed,ttft,lag,memory,grpc" >&2
		exit 1
	fi
	;;
esac
GO=${GO:-go}
[ -x bin/tailgate ] || $GO build -o bin/tailgate ./cmd/tailgate
$GO build -o bin/bench-peers ./bench/peers
exec bin/bench-peers -tailgate bin/tailgate -duration "${BENCH_DURATION:-5s}" -steps "$steps" ${BENCH_MARKDOWN:+-markdown}
