#!/bin/sh
# record.sh FILE ARG...: an exec-channel repair program for the tests. It
# records the arguments it received (one per line) and the lease variables
# of its environment in FILE, so a test can assert exactly what ran; FILE
# doubles as the marker that proves something ran at all.
{
	for a in "$@"; do printf 'arg=%s\n' "$a"; done
	printf 'STADO_LEASE_TOKEN=%s\n' "${STADO_LEASE_TOKEN-unset}"
	printf 'STADO_LEASE_EXPIRES_AT=%s\n' "${STADO_LEASE_EXPIRES_AT-unset}"
	printf 'STADO_FENCE_DEADLINE=%s\n' "${STADO_FENCE_DEADLINE-unset}"
	printf 'SECRET=%s\n' "${AWS_SECRET_ACCESS_KEY-unset}"
} >"$1.tmp"
mv "$1.tmp" "$1"
echo "repaired $*"
# A careless script that prints its token: the channel must redact it.
echo "lease $STADO_LEASE_TOKEN"
