#!/usr/bin/env bash
# run.sh: the full-size reliability suite (`make reliability`). It runs the
# reliability package with STADO_RELIABILITY=full (every store fault kind
# against every target, 120+ crashes, the 2-minute soaks on fs and on a
# flaky S3), then every fuzz target of the module for $FUZZTIME each, and
# writes the figures the issue note needs to OUT (default bin/reliability):
#   suite.log      the suite's verbose output
#   summary.json   faults per kind, crashes per point, soak operations,
#                  violations (all zero on a pass)
#   fuzz.txt       executions per fuzz target
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin/reliability}
mkdir -p "$out"
out=$(cd "$out" && pwd)
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
rm -f "$out/summary.json" "$out/fuzz.txt"

status=0
STADO_RELIABILITY=full STADO_RELIABILITY_SUMMARY="$out/summary.json" \
	"$GO" test -count=1 -v -timeout 90m ./reliability/ >"$out/suite.log" 2>&1 || status=$?
grep -E '^(--- |ok |FAIL|PASS)|^reliability figures|^  [a-z]' "$out/suite.log" | grep -v -- '--- PASS: .*/' || true
if [ "$status" -ne 0 ]; then
	echo "reliability suite FAILED (exit $status): see $out/suite.log"
fi

# Every fuzz target in the module, found by name.
printf '%-28s %-26s %12s %s\n' package target executions result | tee "$out/fuzz.txt"
while IFS=: read -r file target; do
	pkg=./$(dirname "$file")
	log="$out/fuzz-$(echo "$pkg" | tr '/.' '__')-$target.log"
	res=ok
	"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1 || { res=FAILED; status=1; }
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	printf '%-28s %-26s %12s %s\n' "$pkg" "$target" "${execs:-0}" "$res" | tee -a "$out/fuzz.txt"
done < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/' | sed 's|^\./||' | sort)
exit "$status"
