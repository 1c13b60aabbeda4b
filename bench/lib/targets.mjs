// What limits each target when it is missed: written from profiles of this machine, shown
// in RESULTS.md next to a missed target. Keys are the target ids of lib/report.mjs.
export const LIMITS = {
  "redis-256": "",
  "redis-1-p50": "",
  "redis-16-p99": "",
  "memory-ops": "",
  "memory-heap": "",
  "redis-bytes-gcra": "",
  "redis-bytes-fixed-window": "",
  "redis-bytes-sliding-window": "",
  "deny-cache": "",
  "service-sluice": "",
  service: "",
};
