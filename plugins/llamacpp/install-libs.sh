#!/bin/sh
# Installs the llama.cpp libraries the llamacpp plugin loads by default:
# the npm package @node-llama-cpp/linux-x64 (MIT; llama.cpp v0.5.0, commit
# 0ad4a86, with 14 CPU-variant ggml backends), fetched with `npm pack` at a
# pinned version, checked against a pinned sha256 and unpacked into
# third_party/llamacpp/v0.5.0/ (ignored by git). Run by `make llamacpp` and
# .ci/run; nothing downloads at build, test or run time.
set -eu

PACKAGE=@node-llama-cpp/linux-x64
VERSION=3.22.1
SHA256=0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0

root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/third_party/llamacpp/v0.5.0"

if [ -f "$dest/.installed" ] && [ "$(cat "$dest/.installed")" = "$PACKAGE@$VERSION $SHA256" ]; then
	echo "llamacpp: $PACKAGE@$VERSION already in $dest"
	exit 0
fi
case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*)
	echo "llamacpp: the pinned prebuilt libraries are for linux/x86_64 only; on $(uname -s)/$(uname -m) build llama.cpp and point the plugin's lib_dir at it" >&2
	exit 1
	;;
esac
command -v npm >/dev/null 2>&1 || {
	echo "llamacpp: npm not found (apt-get install -y npm, or Node.js 20+)" >&2
	exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
tgz="$tmp/node-llama-cpp-linux-x64-$VERSION.tgz"
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
	echo "llamacpp: $PACKAGE@$VERSION has sha256 $got, expected $SHA256: refusing it" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
cp "$tmp"/package/bins/linux-x64/*.so "$tmp"/package/bins/linux-x64/_nlcBuildMetadata.json "$dest"/
cp "$tmp"/package/LICENSE "$dest"/LICENSE
echo "$PACKAGE@$VERSION $SHA256" >"$dest/.installed"
echo "llamacpp: installed $PACKAGE@$VERSION (llama.cpp v0.5.0) into $dest"
