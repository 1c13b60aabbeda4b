#!/usr/bin/env bash
# Installs the system packages the test suites need, when missing: Debian's redis-server
# (and redis-tools for redis-cli/redis-benchmark), mariadb-server, chromium, nghttp2-client
# (h2load, the Envoy service's C client), and curl and jq (the console's snippets run as a
# user runs them). PostgreSQL 15's
# server binaries ship with the machine image. Needs root (or sudo) for apt-get.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]] || need+=(mariadb-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
if ((${#need[@]})); then
  echo "install-test-deps: installing ${need[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's redis-server and mariadb-server packages may start system services (ports 6379 and
# 3306); the tests use their own servers on free ports and never rely on them.
