#!/bin/sh
# docs/variables.md is picoll_info --markdown's output, generated from the config table; README and
# docs/ name no PICOLL_* variable that picoll does not have (nor the test scripts use).
# Usage: variables_doc.sh SRCDIR BUILDDIR
set -u
src=$1 build=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
"$build/picoll_info" --markdown > "$tmp/variables.md" || { echo "FAIL: picoll_info --markdown failed"; exit 1; }
if ! diff -u "$src/docs/variables.md" "$tmp/variables.md" > "$tmp/diff"; then
    echo "FAIL: docs/variables.md differs from picoll_info --markdown (regenerate it:"
    echo "  $build/picoll_info --markdown > $src/docs/variables.md):"
    head -n 40 "$tmp/diff"
    status=1
else
    echo "docs/variables.md is picoll_info --markdown ($(grep -c '^| `PICOLL_' "$tmp/variables.md") variables)"
fi
# the comparison itself notices a missing row
sed '/^| `PICOLL_HOST`/d' "$tmp/variables.md" > "$tmp/short.md"
if diff -q "$tmp/short.md" "$tmp/variables.md" > /dev/null; then
    echo "FAIL: a table without PICOLL_HOST compared equal"; status=1
fi
# every PICOLL_* name in the user documents exists
grep -o 'PICOLL_[A-Z0-9_]*[A-Z0-9]' "$tmp/variables.md" | sort -u > "$tmp/known"
# ... and what the scripts read from the environment (PICOLL_TEST_MPIS) and the build defines
grep -rhoE '\$\{?PICOLL_[A-Z0-9_]*[A-Z0-9]' "$src/tests" "$src/osu-bench" --include='*.sh' |
    tr -d '${' | sort -u >> "$tmp/known"
grep -rhoE '^PICOLL_[A-Z0-9_]*[A-Z0-9] *=' "$src" --include='Makefile.inc' --include='Makefile.am' |
    tr -d ' =' >> "$tmp/known"
# ... and what picoll_torch's build and package read (torch/: PICOLL_TORCH_DIR)
grep -rhoE 'environ(\.get)?[[(]"PICOLL_[A-Z0-9_]*[A-Z0-9]"' "$src/torch" --include='*.py' |
    grep -oE 'PICOLL_[A-Z0-9_]*' >> "$tmp/known"
unknown() { # unknown FILE...: prints "FILE names NAME" for each name picoll does not have
    for f in "$@"; do
        for v in $(grep -oE '`PICOLL_[A-Z0-9_]*[A-Z0-9][`=]' "$f" | tr -d '`=' | sort -u); do
            case $v in PICOLL_UCX*) continue ;; esac # UCX's own settings, passed to UCX
            grep -qx "$v" "$tmp/known" || echo "${f#$src/} names $v"
        done
    done
}
bad=$(unknown "$src/README" "$src"/docs/*.md)
if [ -n "$bad" ]; then
    echo "$bad" | sed 's/^/FAIL: /; s/$/, which picoll does not have/'; status=1
else
    echo "README and docs/ name only variables picoll has"
fi
# ... and the check notices one it does not have
printf 'Set `PICOLL_NO_SUCH_VARIABLE=1`.\n' > "$tmp/planted.md"
if [ -z "$(unknown "$tmp/planted.md")" ]; then
    echo "FAIL: a document naming PICOLL_NO_SUCH_VARIABLE passed the check"; status=1
fi
exit $status
