#!/bin/sh
# format.sh [SRCDIR]: CTest unit.format. Every tracked C and C++ file of the tree (git ls-files;
# every such file where the tree is not a git checkout) as clang-format writes it with the tree's
# .clang-format (torch/.clang-format for picoll_torch's C++): the file names and clang-format's
# first complaints where one is not. Not the CUDA kernel sources (*.cu, *.cuh), whose device
# one-liners and emulation shims keep the layout they have. Skips (77) without clang-format
# (tests/run.sh installs Debian's).
cd "${1:-$(dirname "$0")/..}" || exit 1
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: no clang-format (apt install clang-format)"
    exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h' '*.cc' '*.cpp' '*.hpp')
else
    files=$(find . -path ./build\* -prune -o \( -name '*.[ch]' -o -name '*.cc' -o -name '*.cpp' \
            -o -name '*.hpp' \) -print)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# one clang-format for every file (each still takes the .clang-format nearest it): a process per
# file cost 7 s of CPU, most of it starting the program
bad=""
# shellcheck disable=SC2086 # the names are git's, without spaces
if ! clang-format --dry-run --Werror $files > /dev/null 2> "$log"; then
    head -n 12 "$log"
    bad=" $(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" |
        sort -u | tr '\n' ' ')"
    [ "$bad" = " " ] && bad=" (clang-format failed: above)"
fi
if [ -n "$bad" ]; then
    echo "FAIL format.sh: not as clang-format writes them (clang-format -i FILE):$bad"
    exit 1
fi
echo "format.sh: $(echo $files | wc -w) files as clang-format $(clang-format --version | sed 's/.*version \([0-9.]*\).*/\1/') writes them"
