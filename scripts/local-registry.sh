#!/usr/bin/env bash
# A local npm registry for the install tests (test/integration/registry.test.ts): installs
# Verdaccio (pinned) from npm into .cache/ once, then prints the path of its executable.
#   bash scripts/local-registry.sh            → /…/.cache/verdaccio-6.8.0/node_modules/.bin/verdaccio
# The tests run it with a config that has no uplinks, so it never reaches the internet: it serves
# only what is published to it.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=6.8.0
dir=.cache/verdaccio-$VERSION
bin=$dir/node_modules/.bin/verdaccio
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null 2>&1 || { echo "local-registry: npm (Node.js ≥ 20) is needed to install Verdaccio" >&2; exit 1; }
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"fuse-uring-local-registry","private":true}' > "$dir/package.json"
  printf '[local-registry] npm install verdaccio@%s into %s\n' "$VERSION" "$dir" >&2
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "verdaccio@$VERSION" >&2)
fi
echo "$PWD/$bin"
