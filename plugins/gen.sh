#!/usr/bin/env bash
# Regenerates the committed gRPC code of plugins/proto and the Python SDK's
# message code,
# python/cde_plugin/cde_strategy_pb2.py (protoc's own Python generator; the
# SDK registers the service by hand, so no grpc_tools is needed). CI does not run this: the generated files are
# committed. Needs protoc (Debian: apt-get install protobuf-compiler
# libprotobuf-dev; tested with libprotoc 3.21.12) and the pinned generators:
#
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
#
# (protoc-gen-go matches google.golang.org/protobuf v1.36.12 in go.mod;
# protoc-gen-go-grpc v1.6.1 emits code for google.golang.org/grpc >= 1.64,
# go.mod has v1.79.1.)
set -euo pipefail
cd "$(dirname "$0")"
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.1
if [[ "${1:-}" == "--install" || "${1:-}" == "--install-only" ]]; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
  go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
  [[ "$1" == "--install-only" ]] && exit 0 # .ci/run: the generators for TestGeneratedCodeFresh
fi
export PATH="$(go env GOPATH)/bin:$PATH"
OUT="${GEN_OUT:-.}"
protoc --proto_path=proto \
  --go_out="$OUT/proto" --go_opt=paths=source_relative \
  --go-grpc_out="$OUT/proto" --go-grpc_opt=paths=source_relative \
  proto/cde_strategy.proto
PYOUT="${GEN_OUT:-..}"
[[ -n "${GEN_OUT:-}" ]] && PYOUT="$GEN_OUT/python" && mkdir -p "$PYOUT/cde_plugin"
[[ -z "${GEN_OUT:-}" ]] && PYOUT="../python"
protoc --proto_path=proto --python_out="$PYOUT/cde_plugin" proto/cde_strategy.proto
