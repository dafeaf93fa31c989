#!/usr/bin/env bash
# npm run test:guest — the part of the suite listed in test/vm/guest-tests.txt, run in the
# Linux 7.3 guest (scripts/vm.sh, -cpu max), then the baseline-CPU check (test/vm/baseline-cpu.guest.ts
# in a guest whose CPU has no AVX: the shim built by scripts/setup.sh and dist/fuse-uring from
# scripts/compile.sh must run there). Ends with one "N passed, N failed" line over both JUnit
# reports (.cache/vm-junit/guest.xml, baseline.xml; scripts/test.sh folds them into its own).
# A guest that does not boot or writes no report counts as failed: nothing is skipped.
#   bash scripts/test-guest.sh [--no-summary] [FILE…]   (FILEs replace the list; the baseline check
#   still runs; --no-summary: scripts/test.sh prints the one closing line itself)
# Environment: see scripts/vm.sh (FUSE_URING_VM_*); FUSE_URING_BASELINE_CPU (default Nehalem).
set -uo pipefail
cd "$(dirname "$0")/.."
log() { printf '[test:guest] %s\n' "$*" >&2; }
BASELINE_CPU=${FUSE_URING_BASELINE_CPU:-Nehalem}
out=.cache/vm-junit
rm -rf "$out"; mkdir -p "$out"
reports=("$out/guest.xml" "$out/baseline.xml")
print_summary=1
if [ "${1:-}" = --no-summary ]; then print_summary=0; shift; fi
summary() {
  if [ $print_summary = 1 ]; then python3 scripts/junit-summary.py "${reports[@]}"
  else python3 scripts/junit-summary.py "${reports[@]}" >/dev/null 2>&1; fi
}

if [ $# -gt 0 ]; then files=("$@")
else mapfile -t files < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' test/vm/guest-tests.txt | grep -v '^$')
fi
envs=()
while IFS= read -r line; do envs+=(--env "$line"); done < <(sed -e 's/^[[:space:]]*#.*//' test/vm/guest.env | grep -v '^[[:space:]]*$')

bash scripts/setup.sh || { log "set-up failed"; summary; exit 1; }
# The baseline check's inputs: dist/fuse-uring (Bun's baseline runtime inside) and Bun's
# baseline build as the test runner (the npm `bun` package installs the AVX2 build here).
bash scripts/compile.sh || log "npm run compile failed: the baseline check will fail"
bun_version=$(node_modules/.bin/bun --version)
base_bun=.cache/bun-baseline/$bun_version/package/bin/bun
if [ ! -x "$base_bun" ]; then
  log "fetching @oven/bun-linux-x64-baseline@$bun_version (npm registry)"
  d=$(dirname "$(dirname "$(dirname "$base_bun")")")
  rm -rf "$d"; mkdir -p "$d"
  (cd "$d" && npm pack -q "@oven/bun-linux-x64-baseline@$bun_version" >/dev/null && tar xzf ./*.tgz && rm -f ./*.tgz) \
    || log "cannot fetch Bun's baseline build: the baseline check will fail"
fi

t0=$(date +%s)
log "in the guest (-cpu max): ${files[*]}"
# --timeout: bun's default per-test limit, × FUSE_URING_TIME_SCALE (4, test/vm/guest.env) like
# the harness's own limits.
bash scripts/vm.sh "${envs[@]}" -- node_modules/.bin/bun test --timeout 480000 \
  --reporter=junit --reporter-outfile="$out/guest.xml" "${files[@]}"
log "guest tests took $(( $(date +%s) - t0 ))s"

t1=$(date +%s)
log "in the guest (-cpu $BASELINE_CPU, no AVX): test/vm/baseline-cpu.guest.ts"
bash scripts/vm.sh --cpu "$BASELINE_CPU" --env FUSE_URING_BASELINE_CPU="$BASELINE_CPU" -- \
  "$base_bun" test --timeout 120000 --reporter=junit --reporter-outfile="$out/baseline.xml" ./test/vm/baseline-cpu.guest.ts
log "baseline check took $(( $(date +%s) - t1 ))s"
summary
