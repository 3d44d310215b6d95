#!/usr/bin/env bash
# Regenerates eventpb/event.pb.go from eventpb/event.proto with protoc and
# the protoc-gen-go that plugins/gen.sh pins (install it with
# `bash plugins/gen.sh --install-only`). GEN_OUT=DIR writes there instead
# (the freshness test).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$(go env GOPATH)/bin:$PATH"
OUT="${GEN_OUT:-.}"
mkdir -p "$OUT/eventpb"
protoc --proto_path=eventpb --go_out="$OUT/eventpb" --go_opt=paths=source_relative eventpb/event.proto
