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
# The whole suite runs, then the files below again with FUSE_TEST_WORKERS=1 (test/helpers/daemon.ts
# then adds --workers 1 to every io_uring mount): the first pass runs the default, a copy of memfs
# and of the passthrough per CPU (--workers auto), the second one thread's engine.
# With file arguments, only those run, once (set FUSE_TEST_WORKERS yourself for the second mode).
WORKER_PASS=(test/integration/exactly-once.test.ts test/integration/passthrough.test.ts test/integration/dataplane.test.ts
  test/integration/names.test.ts test/integration/descriptors.test.ts test/integration/handlers.test.ts
  test/integration/path-dataplane.test.ts)
dir=$(mktemp -d)
reports=("$dir/junit.xml")
[ $# -eq 0 ] && unset FUSE_TEST_WORKERS   # the first full pass runs the defaults
node_modules/.bin/bun test --timeout 120000 --reporter=junit --reporter-outfile="$dir/junit.xml" "$@"
rc=$?
if [ $# -eq 0 ]; then
  echo "[test] second pass with FUSE_TEST_WORKERS=1 (--workers 1 on io_uring mounts: one thread): ${WORKER_PASS[*]}"
  reports+=("$dir/junit-workers.xml")
  FUSE_TEST_WORKERS=1 node_modules/.bin/bun test --timeout 120000 --reporter=junit --reporter-outfile="$dir/junit-workers.xml" "${WORKER_PASS[@]}"
  rc2=$?
  [ $rc -eq 0 ] && rc=$rc2
fi
# One closing line over both passes; a pass without a report counts as one failure.
python3 - "${reports[@]}" <<'PY'
import os, sys, xml.etree.ElementTree as ET
t = f = sk = 0
for path in sys.argv[1:]:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        t += 1; f += 1
        continue
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    t += sum(int(s.get("tests", 0)) for s in suites)
    f += sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    sk += sum(int(s.get("skipped", 0)) for s in suites)
print(f"{t - f - sk} passed, {f} failed" + (f", {sk} skipped" if sk else ""))
sys.exit(1 if f else 0)
PY
[ $? -ne 0 ] && [ $rc -eq 0 ] && rc=1
exit $rc
