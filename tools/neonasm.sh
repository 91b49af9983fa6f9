#!/bin/sh
# neonasm.sh [-check] FILE.s...: fills in the encodings of the arm64
# instructions Go's assembler lacks (SDOT, SCVTF, FCVTL, FMLA by element,
# ...). Each is written as a WORD whose comment is the instruction:
#
#	WORD	$0x00000000	// sdot v18.4s, v4.16b, v6.16b
#	WORD	$0x00000000	/* sdot v18.4s, v4.16b, v6.16b */ \   (in a #define)
#
# and this script assembles every such comment with GNU as (binutils'
# aarch64-linux-gnu-as, Debian package binutils-aarch64-linux-gnu) and
# rewrites the WORD with its encoding, so the comment is the source of truth.
# With -check it rewrites nothing and fails if an encoding is not its
# comment's (TestNEONEncodings runs it where the cross binutils are installed).
set -eu
check=0
if [ "${1:-}" = -check ]; then
	check=1
	shift
fi
AS=${AS:-aarch64-linux-gnu-as}
OBJDUMP=${OBJDUMP:-aarch64-linux-gnu-objdump}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A WORD line: $1 up to the hex digits, $2 the digits, $3 the rest, $4 or $5
# the instruction.
re='^(\s*WORD\s+\$0x)([0-9a-fA-F]*)(\s*(?://\s*(.*?)\s*|/\*\s*(.*?)\s*\*/\s*\\?\s*))$'
status=0
for f in "$@"; do
	RE="$re" perl -ne 'print "\t", (defined $4 ? $4 : $5), "\n" if /$ENV{RE}/' "$f" >"$tmp/in.s"
	if [ ! -s "$tmp/in.s" ]; then
		continue
	fi
	"$AS" -march=armv8.2-a+dotprod+fp16 -o "$tmp/in.o" "$tmp/in.s"
	"$OBJDUMP" -d "$tmp/in.o" | perl -ne 'print "$1\n" if /^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s/' >"$tmp/words"
	if [ "$(wc -l <"$tmp/words")" -ne "$(wc -l <"$tmp/in.s")" ]; then
		echo "$f: assembled $(wc -l <"$tmp/words") words from $(wc -l <"$tmp/in.s") instructions" >&2
		exit 1
	fi
	RE="$re" WORDS="$tmp/words" perl -pe '
		BEGIN { open(W, $ENV{WORDS}) or die; @w = map { chomp; $_ } <W>; }
		s/$ENV{RE}/$1 . (shift @w) . $3/e;
	' "$f" >"$tmp/out.s"
	if [ $check = 1 ]; then
		if ! cmp -s "$f" "$tmp/out.s"; then
			echo "$f: encodings differ from their comments:" >&2
			diff "$f" "$tmp/out.s" >&2 || true
			status=1
		fi
	elif ! cmp -s "$f" "$tmp/out.s"; then
		cp "$tmp/out.s" "$f"
		echo "neonasm: $f updated"
	fi
done
exit $status
