#!/usr/bin/env bash
# make demo: three small local services, a fresh embedded store, one killed
# service, one tick in report mode and one in enforce-safe, with
# `stado optimize status` after each. It cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/stado-demo.XXXXXX")
cleanup() {
	for f in "$work"/units/*.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/bin/stado" ./cmd/stado
go build -o "$work/bin/demo-service" ./examples/demo-service
mkdir -p "$work/units"

for unit in api web cache; do
	"$work/bin/demo-service" freeaddr >"$work/units/$unit.service.addr"
	"$work/bin/demo-service" restart "$work/units" "$unit.service" >/dev/null
done

cat >"$work/config.yaml" <<YAML
channels:
  exec:
    actions:
      restart: ["$work/bin/demo-service", "restart", "$work/units", "{unit}"]
      check:   ["$work/bin/demo-service", "check", "$work/units", "{unit}"]
YAML
{
	echo "services:"
	for unit in api web cache; do
		cat <<YAML
  - name: $unit
    host: demo-host
    unit: $unit.service
    endpoint: http://$(cat "$work/units/$unit.service.addr")/healthz
    repair: restart
    channel: exec
YAML
	done
} >"$work/registry.yaml"

stado() { "$work/bin/stado" --store "$work/store" --config "$work/config.yaml" "$@"; }
if [ -t 1 ]; then
	say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
else
	say() { printf '\n$ %s\n' "$*"; }
fi

say "stado service apply -f registry.yaml"
stado service apply -f "$work/registry.yaml"

sed 's/^mode: .*/mode: report/' configs/policy.yaml | sed 's/^policy_version: .*/policy_version: "demo-report"/' >"$work/policy.yaml"
say "stado optimize policy apply -f policy.yaml   # mode: report"
stado optimize policy apply -f "$work/policy.yaml"

say "kill the api service"
kill "$(cat "$work/units/api.service.pid")"
sleep 0.2
say "stado beacon publish --host demo-host --state api.service=failed --state web.service=active --state cache.service=active"
stado beacon publish --host demo-host --state api.service=failed --state web.service=active --state cache.service=active

say "stado optimize run   # report mode: the repair is planned, nothing runs"
stado optimize run
say "stado optimize status"
stado optimize status

version=$(stado optimize policy show | sed -n 's/^version: //p')
sed 's/^mode: .*/mode: enforce-safe/' configs/policy.yaml | sed 's/^policy_version: .*/policy_version: "demo-enforce"/' >"$work/policy.yaml"
say "stado optimize policy apply -f policy.yaml --expect-version $version   # mode: enforce-safe"
stado optimize policy apply -f "$work/policy.yaml" --expect-version "$version"

say "stado optimize run   # enforce-safe: restarted through the exec channel and verified"
stado optimize run
say "stado optimize status"
stado optimize status
