#!/usr/bin/env bash
# The test command (README): set-up, then the whole suite against the real kernel, then part of
# it again in a Linux 7.3 guest plus the baseline-CPU check (scripts/test-guest.sh).
# Prints one closing "N passed, N failed" line over every JUnit report (host passes and guest).
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
  test/integration/path-dataplane.test.ts test/integration/io.test.ts test/integration/dirs.test.ts
  test/integration/metadata.test.ts)
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
# The guest part (full runs only): test/vm/guest-tests.txt in the Linux 7.3 guest under QEMU,
# then the shim and dist/fuse-uring on a CPU without AVX. A guest that does not boot or writes
# no report counts as failed (never skipped); its reports join the closing line.
if [ $# -eq 0 ]; then
  echo "[test] the Linux 7.3 guest: scripts/test-guest.sh (test/vm/guest-tests.txt, then the baseline-CPU check)"
  bash scripts/test-guest.sh --no-summary
  rcg=$?
  reports+=(.cache/vm-junit/guest.xml .cache/vm-junit/baseline.xml)
  [ $rc -eq 0 ] && rc=$rcg
fi
# One closing line over all passes; a pass without a report counts as one failure.
python3 scripts/junit-summary.py "${reports[@]}"
[ $? -ne 0 ] && [ $rc -eq 0 ] && rc=1
exit $rc
