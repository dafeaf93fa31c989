#!/usr/bin/env bash
# The test command (README): set-up, then the whole suite against the real kernel.
# Prints a closing "N passed, N failed" line taken from bun's JUnit report.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
if [ "$(id -u)" = 0 ]; then
  # Root: make FUSE-over-io_uring available (tests that need it off flip it themselves) and
  # mount fusectl so hung connections can be aborted by the test watchdog.
  [ -w /sys/module/fuse/parameters/enable_uring ] && echo Y > /sys/module/fuse/parameters/enable_uring
  mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
fi
report=$(mktemp -d)/junit.xml
node_modules/.bin/bun test --timeout 120000 --reporter=junit --reporter-outfile="$report" "$@"
rc=$?
if [ -s "$report" ]; then
  python3 - "$report" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
sk = sum(int(s.get("skipped", 0)) for s in suites)
print(f"{t - f - sk} passed, {f} failed" + (f", {sk} skipped" if sk else ""))
PY
else
  echo "0 passed, 1 failed"
  [ $rc -eq 0 ] && rc=1
fi
exit $rc
