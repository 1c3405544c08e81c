#!/bin/sh
# shm_in_use.sh NAME: exits 0 when a live process maps /dev/shm/NAME or holds it open (a segment
# of a job that still runs, beside the one whose leftovers are checked), else 1. For the leftover
# checks of tests/host/expect.sh and tests/net/hosts.sh.
grep -qsF "/dev/shm/$1" /proc/[0-9]*/maps && exit 0
for fd in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$fd" 2>/dev/null)" = "/dev/shm/$1" ] && exit 0
done
exit 1
