#!/bin/bash
# One run of the progress thread's device path (PICOLL_STREAM_DIRECT=1) on the GPU; if it is still
# running after 25 s, every thread's stack of every rank (gdb), then the job is killed.
B=/work/main/build-lead
out=$1
which gdb > $out/which.txt 2>&1
nvidia-smi -L >> $out/which.txt 2>&1
export PICOLL_STREAM_KERNELS=0 PICOLL_STREAM_DIRECT=1 PICOLL_STATS=1
mode=$2
if [ "$mode" = mps ]; then
  mkdir -p /tmp/picoll-mps/pipe /tmp/picoll-mps/log
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/picoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/picoll-mps/log
  nvidia-cuda-mps-control -d && echo "MPS started" >> $out/which.txt
fi
for np in 2; do
  ( timeout -k 5 35 $B/tests/mpirun.sh $np --preload $B/tests/cuda/enqueue --thread > $out/run-np$np.log 2>&1; echo "rc=$?" >> $out/run-np$np.log ) &
  job=$!
  for i in $(seq 20); do sleep 1; kill -0 $job 2>/dev/null || break; done
  if kill -0 $job 2>/dev/null; then
    echo "still running after 25 s" >> $out/hang.txt
    for pid in $(pgrep -f "tests/cuda/enqueue --thread" | grep -v $$); do
      [ -r /proc/$pid/cmdline ] || continue
      tr '\0' ' ' < /proc/$pid/cmdline | grep -q "^$B/tests/cuda/enqueue" || continue
      echo "== pid $pid" >> $out/hang.txt
      timeout 30 gdb -q -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 25" >> $out/bt-$pid.txt 2>&1
      ls /proc/$pid/task | while read t; do echo "task $t: $(cat /proc/$pid/task/$t/comm) $(cat /proc/$pid/task/$t/wchan 2>/dev/null)"; done >> $out/hang.txt
    done
  fi
  wait $job
done
nvidia-smi >> $out/which.txt 2>&1
[ "$mode" = mps ] && echo quit | nvidia-cuda-mps-control
