#!/bin/sh
# CTest torch.ready, the torch tests' fixture: picoll_torch is importable by TORCH_TEST_PYTHON.
# tests/run.sh builds it beside the first tests (pip install ./torch, about 50 s of compiling) and
# names in TORCH_TEST_READY the file that pip's exit status goes to: this waits for that file (at
# most LIMIT seconds, default 590), and fails showing the end of pip's log (the file with .log
# for .status) where pip failed. Without TORCH_TEST_READY, picoll_torch must be installed already.
limit=${1:-590}
ready=${TORCH_TEST_READY:-}
if [ -n "$ready" ]; then
    waited=0
    while [ ! -f "$ready" ]; do
        if [ "$waited" -ge "$limit" ]; then
            echo "FAIL torch.ready: no word from pip install ./torch after $limit s ($ready)"
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    status=$(cat "$ready")
    if [ "$status" != 0 ]; then
        tail -n 40 "${ready%.status}.log"
        echo "FAIL torch.ready: pip install ./torch exited $status (above)"
        exit 1
    fi
    echo "torch.ready: pip install ./torch ended after $waited s of waiting here"
fi
# found, not imported (the import starts MPI)
if ! "$TORCH_TEST_PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('picoll_torch') is None)"; then
    echo "FAIL torch.ready: $TORCH_TEST_PYTHON finds no picoll_torch"
    exit 1
fi
echo "torch.ready: $TORCH_TEST_PYTHON finds picoll_torch"
