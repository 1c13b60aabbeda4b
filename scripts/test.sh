#!/usr/bin/env bash
# The test command (`npm test`): installs what the suites need, builds the packages (the
# examples, the import tests and the service's process tests run the built code), then runs
# every test. Servers (redis-server, a Redis Cluster and Sentinel, PostgreSQL, Chromium) are
# started by the tests themselves on 127.0.0.1 and stopped when they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
npm run build --silent
npx vitest run "$@"
