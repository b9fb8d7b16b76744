#!/bin/sh
# make bench-peers: tailgate beside wrk, hey and a no-parse stream reader,
# all measured on this machine in one run, as one table of ratios (see
# bench/peers). Installs wrk and hey from Debian's packages when missing.
set -eu
cd "$(dirname "$0")/.."
need=""
command -v wrk >/dev/null 2>&1 || need="$need wrk"
command -v hey >/dev/null 2>&1 || need="$need hey"
if [ -n "$need" ]; then
	echo "bench-peers: installing$need from Debian's packages" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get install -y $need >/dev/null || { $sudo apt-get update >/dev/null && $sudo apt-get install -y $need >/dev/null; }
fi
GO=${GO:-go}
[ -x bin/tailgate ] || $GO build -o bin/tailgate ./cmd/tailgate
$GO build -o bin/bench-peers ./bench/peers
exec bin/bench-peers -tailgate bin/tailgate -duration "${BENCH_DURATION:-5s}"
