#!/usr/bin/env bash
# The test command (`npm test`): installs what the suites need, builds the packages (the
# examples, the import tests and the service's process tests run the built code), then runs
# every test. Servers (redis-server, a Redis Cluster and Sentinel, PostgreSQL, Chromium) are
# started by the tests themselves on 127.0.0.1 and stopped when they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
npm run build --silent
# The multi-region test asserts latencies of real processes (hot decisions' p99 ≤ 25 ms): it
# runs after the rest, alone, so that no other test file's processes share the two cores.
ALONE=packages/sluice/test/redis/multi-region.test.ts
if [ $# -eq 0 ]; then
  npx vitest run --exclude "$ALONE"
  npx vitest run "$ALONE"
else
  npx vitest run "$@"
fi
