#!/bin/sh
# The reduction loops of libpicoll.so must be vectorised: on x86-64 each loop named below must hold
# a packed SSE/AVX instruction of its operation. (They were not, for a while: the user's default
# CFLAGS, "-g -O2", came after the library's -O3 and every loop ran one element at a time.)
#   reduce_vectorised.sh BUILDDIR
lib="$1/.libs/libpicoll.so"
case "$(uname -m)" in
x86_64) ;;
*) echo "SKIP: the instruction names checked are x86-64's (this is $(uname -m))"; exit 77 ;;
esac
if ! command -v objdump >/dev/null 2>&1; then
    echo "SKIP: objdump (binutils) is not installed"; exit 77
fi
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
objdump -d --no-show-raw-insn "$lib" > "$1/tests/unit/reduce_vectorised.dis" || { echo "FAIL: objdump $lib"; exit 1; }
status=0
# function, then the packed instructions any of which shows it vectorised (the AVX2 clones' too)
for want in "reduce2_i8_sum paddb" "reduce_acc_i8_sum paddb" "reduce2_u8_max pmaxub" \
            "reduce2_i32_sum paddd" "reduce_acc_i32_sum paddd" "reduce2_i16_min pminsw" \
            "reduce2_f32_sum addps" "reduce_acc_f32_sum addps" "reduce2_f64_sum addpd" \
            "reduce2_f32_prod mulps" "reduce2_u32_bxor pxor|xorps"; do
    fn=${want%% *}; insn=${want#* }
    n=$(awk -v fn="$fn" -v re="^v?($insn)\$" '
        /^[0-9a-f]+ <.*>:$/ { name = $2; gsub(/[<>:]/, "", name); sub(/\..*/, "", name); next }
        name == fn { for (i = 2; i <= NF; i++) if ($i ~ re) { c++; break } }
        END { print c + 0 }' "$1/tests/unit/reduce_vectorised.dis")
    if [ "$n" -gt 0 ]; then
        echo "ok: $fn uses $insn ($n)"
    else
        echo "FAIL: $fn has no $insn instruction: the loop is not vectorised"
        status=1
    fi
done
exit $status
