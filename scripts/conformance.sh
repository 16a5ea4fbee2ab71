#!/usr/bin/env bash
# conformance: controller-runtime v0.25.2's cache conformance suite (the
# crcache harness, tools/crcache, a copy of ../shared/crcache) against jcache.New, checked against
# the committed list of expected failures.
#
#   scripts/conformance.sh [extra args for the test binary, e.g. -ginkgo.focus=...]
#
# Env: CRCACHE_RUN (the harness's run.sh; default the first of
#      tools/crcache/run.sh (a copy of the shared harness) and ../shared/crcache/run.sh),
#      KUBEBUILDER_ASSETS (etcd and kube-apiserver; default .cache/bin),
#      CRCACHE_OUT (default .cache/crcache), EXPECTED (the list; default
#      jcache/CONFORMANCE-expected-failures.txt).
# The list holds one spec per line, "Describe > ... > It | reason" (a plain
# Go test of the suite as "go test > TestName | reason"); blank
# lines and lines starting with # are comments. The run fails on a failed
# spec the list does not name, and on a listed spec that now passes (so
# the list only shrinks: remove it). A focused run checks only the specs
# that ran, and the suite's two plain Go tests (they always run). The last line is the harness's summary line.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
run="${CRCACHE_RUN:-}"
if [ -z "$run" ]; then
  for c in tools/crcache/run.sh ../shared/crcache/run.sh; do
    [ -x "$c" ] && { run="$c"; break; }
  done
fi
[ -n "$run" ] && [ -x "$run" ] || { echo "conformance: no crcache harness (set CRCACHE_RUN to its run.sh)" >&2; exit 2; }
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$root/.cache/bin}"
export CRCACHE_OUT="${CRCACHE_OUT:-$root/.cache/crcache}"
expected="${EXPECTED:-$root/jcache/CONFORMANCE-expected-failures.txt}"
specs="$(dirname "$run")/specs.sh"
impl=github.com/watchjournal/watchjournal/jcache.New
report="$CRCACHE_OUT/report-$(printf '%s' "$impl" | tr -c 'A-Za-z0-9._-' '_').json"

rm -f "$report"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$run" ./jcache.New "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
summary="$(tail -n 1 "$out")"
if [ "$rc" -eq 2 ] || [ ! -f "$report" ]; then
  echo "conformance: the suite did not run"
  echo "$summary"
  exit 2
fi

got="$(mktemp)" want="$(mktemp)" ran="$(mktemp)"
trap 'rm -f "$out" "$got" "$want" "$ran"' EXIT
goFailed="$(sed -n 's/^crcache: plain Go tests failed: //p' "$out" | tr ',' '\n' | sed 's/^ *//; s/^/go test > /')"
{ "$specs" "$report" | awk -F'\t' '$2!="passed" && $2!="skipped" && $2!="pending" {print $1}'; [ -n "$goFailed" ] && printf '%s\n' "$goFailed"; } | LC_ALL=C sort -u >"$got"
{ "$specs" "$report" | awk -F'\t' '$2!="skipped" && $2!="pending" {print $1}'; printf 'go test > %s\n' TestReaderWaitsForCacheSync TestIndexFieldDoesNotBlock; } | LC_ALL=C sort -u >"$ran"
grep -v '^[[:space:]]*\(#\|$\)' "$expected" 2>/dev/null | sed 's/[[:space:]]*|.*$//' | LC_ALL=C sort -u | LC_ALL=C comm -12 - "$ran" >"$want"

status=0
new="$(LC_ALL=C comm -23 "$got" "$want")"
fixed="$(LC_ALL=C comm -13 "$got" "$want")"
if [ -n "$new" ]; then
  echo "conformance: failed, not in $(basename "$expected"):"; printf '%s\n' "$new" | sed 's/^/  /'
  status=1
fi
if [ -n "$fixed" ]; then
  echo "conformance: listed in $(basename "$expected") but passed now (remove them):"; printf '%s\n' "$fixed" | sed 's/^/  /'
  status=1
fi
[ "$status" -eq 0 ] && echo "conformance: every failure is listed ($(wc -l <"$want") expected)"
echo "$summary"
exit "$status"
