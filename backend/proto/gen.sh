#!/bin/sh
# Regenerates backend/internal/backendpb from backend.proto with Debian's
# protoc (apt: protobuf-compiler) and pinned Go generators installed into a
# local bin directory, so the committed code only changes when the pins do.
set -eu

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

here=$(cd "$(dirname "$0")" && pwd)
backend=$(dirname "$here")
bin=${PROTO_BIN:-$backend/../bin/tools}

command -v protoc >/dev/null 2>&1 || {
	echo "gen.sh: protoc not found; install it with: apt-get install -y protobuf-compiler" >&2
	exit 1
}

mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
want_go="protoc-gen-go $PROTOC_GEN_GO_VERSION"
want_grpc="protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"
if [ "$("$bin/protoc-gen-go" --version 2>/dev/null || true)" != "$want_go" ]; then
	GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if [ "$("$bin/protoc-gen-go-grpc" --version 2>/dev/null || true)" != "$want_grpc" ]; then
	GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

out="$backend/internal/backendpb"
mkdir -p "$out"
PATH="$bin:$PATH" protoc -I "$here" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	"$here/backend.proto"
