#!/usr/bin/env bash
# install-deps.sh PACKAGE...: installs, with apt-get, the Debian packages that are missing.
# Shared by the test command (tests/run.sh) and the main job (osu-bench/run.sh).
set -euo pipefail
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
echo "== installing:$missing"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
