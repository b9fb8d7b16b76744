#!/usr/bin/env bash
# Ollama for the tests: built from the Go module proxy with cgo (CPU backend,
# no CMake) and cached, then served on loopback with a tiny model.
#
#   scripts/ollama.sh build          build (once) and print the binary's path
#   scripts/ollama.sh path           print the cached binary's path, or fail
#   scripts/ollama.sh serve PORT DIR serve on 127.0.0.1:PORT with models tiny
#                                    and tiny-eos (internal/gguf) under DIR;
#                                    prints the server's PID (stop: kill PID)
#
# The e2e tests (e2e/ollama) start and stop servers themselves from the
# binary; TAILGATE_OLLAMA names it (else the cache path below is looked at).
#
# Module zips drop llama/llama.cpp/vendor, so nlohmann/json and stb come from
# Debian's packages and miniaudio.h from the malgo module. The version is
# set as Ollama's release build sets it (else /api/version says 0.0.0).
set -euo pipefail

OLLAMA_VERSION=${OLLAMA_VERSION:-v0.17.4}
MALGO_VERSION=v0.11.24
CACHE=${TAILGATE_OLLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tailgate/ollama-$OLLAMA_VERSION}
BIN=$CACHE/bin/ollama
GO=${GO:-go}

build() {
	if [ -x "$BIN" ]; then
		echo "$BIN"
		return
	fi
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	if [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/stb/stb_image.h ]; then
		echo "ollama.sh: installing nlohmann-json3-dev libstb-dev" >&2
		$sudo apt-get install -y -qq --no-install-recommends nlohmann-json3-dev libstb-dev >/dev/null \
			|| { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nlohmann-json3-dev libstb-dev >/dev/null; }
	fi
	mkdir -p "$CACHE/include/miniaudio" "$CACHE/bin"
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	# go mod download needs a module to run in when GOFLAGS has -mod=mod.
	local malgo
	malgo=$(cd "$work" && GOFLAGS= $GO mod download -json "github.com/gen2brain/malgo@$MALGO_VERSION" \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -f "$malgo/miniaudio.h" ] || { echo "ollama.sh: miniaudio.h not found in malgo ($malgo)" >&2; exit 1; }
	cp "$malgo/miniaudio.h" "$CACHE/include/miniaudio/miniaudio.h"
	echo "ollama.sh: building ollama $OLLAMA_VERSION (several minutes)" >&2
	local start=$SECONDS
	# Build into a temporary GOBIN and move into place: a half-built binary
	# never sits at $BIN.
	(cd "$work" && CPATH="$CACHE/include${CPATH:+:$CPATH}" CGO_CFLAGS="${CGO_CFLAGS:-} -w" CGO_CXXFLAGS="${CGO_CXXFLAGS:-} -w" \
		GOBIN="$work/bin" GOFLAGS=-mod=mod $GO install -ldflags "-X github.com/ollama/ollama/version.Version=${OLLAMA_VERSION#v}" \
		"github.com/ollama/ollama@$OLLAMA_VERSION")
	mv "$work/bin/ollama" "$BIN"
	echo "ollama.sh: built in $((SECONDS - start)) s" >&2
	echo "$BIN"
}

# serve starts Ollama in the background on 127.0.0.1:$1, its models and
# log under $2, creates the tiny models, and prints its PID.
serve() {
	local port=$1 dir=$2 bin
	bin=$(build)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	export OLLAMA_HOST=127.0.0.1:$port OLLAMA_MODELS=$dir/models OLLAMA_KEEP_ALIVE=-1 HOME=$dir
	"$bin" serve >"$dir/ollama.log" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do
		curl -fsS "http://$OLLAMA_HOST/api/version" >/dev/null 2>&1 && break
		sleep 0.1
	done
	$GO run ./internal/gguf/tinygguf -o "$dir/tiny.gguf"
	$GO run ./internal/gguf/tinygguf -o "$dir/tiny-eos.gguf" -eos-logit 1.2
	for m in tiny tiny-eos; do
		printf 'FROM ./%s.gguf\n' "$m" >"$dir/$m.Modelfile"
		(cd "$dir" && "$bin" create "$m" -f "$m.Modelfile" >"$dir/create.log" 2>&1) || { cat "$dir/create.log" >&2; exit 1; }
	done
	echo "$pid"
}

case "${1:-build}" in
build) build ;;
serve)
	[ $# -eq 3 ] || { echo "usage: $0 serve PORT DIR" >&2; exit 2; }
	serve "$2" "$3"
	;;
path)
	[ -x "$BIN" ] || { echo "ollama.sh: $BIN not built (scripts/ollama.sh build)" >&2; exit 1; }
	echo "$BIN"
	;;
*)
	echo "usage: $0 build|path|serve PORT DIR" >&2
	exit 2
	;;
esac
