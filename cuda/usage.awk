# Summarises nvcc's --resource-usage output (ptxas's lines, the fatbin rule in cuda/Makefile.inc
# saves them in cuda/coll_kernel.usage): one line per kernel and architecture, with its registers
# a thread, stack frame and spills; any other line (a warning) is printed as it is.
#   awk -f cuda/usage.awk FILE             the summary
#   awk -v check=1 -f cuda/usage.awk FILE  the same, and exit 1 if any function spills registers
#                                          or no kernel was compiled (CTest cuda.kernel.usage)
/Compiling entry function/ {
    split($0, q, "'")
    kernel = q[2]; arch = q[4]; frame = "?"; spills = 0
    next
}
/bytes stack frame/ {
    # "N bytes stack frame, S bytes spill stores, L bytes spill loads" of the function just named
    if (kernel_frame_pending) { frame = $1 }
    if ($5 + 0 > 0 || $9 + 0 > 0) {
        spills += $5 + $9
        bad = bad sprintf("  %s: %s bytes spilled (stores) and %s (loads)\n", fn, $5, $9)
    }
    next
}
/Function properties for/ {
    fn = $NF; kernel_frame_pending = (fn == kernel)
    next
}
/Used [0-9]+ registers/ {
    for (i = 1; i < NF; i++) {
        if ($i == "Used") { regs = $(i + 1) }
    }
    if (kernel != "") {
        printf "  kernel %s for %s: %s registers a thread, %s bytes stack frame, %s bytes spilled\n", \
            kernel, arch, regs, frame, spills
        kernels++
    }
    kernel = ""
    next
}
/^ptxas info/ { next }
{ print }
END {
    if (check && bad != "") {
        printf "FAIL: register spills:\n%s", bad
        exit 1
    }
    if (check && kernels == 0) {
        print "FAIL: no kernel in the resource usage (is this nvcc --resource-usage output?)"
        exit 1
    }
}
