#!/bin/sh
# stands in for the torch tests' Python when TORCH_TEST_PYTHON is not set: skipped (CTest's 77)
echo "no Python with torch and picoll_torch: set TORCH_TEST_PYTHON (tests/run.sh does)"
exit 77
