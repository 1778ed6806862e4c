#!/bin/sh
# restart-service.sh DIR UNIT NOTE: the ssh test's stand-in for
# "systemctl restart UNIT" on a remote host. DIR holds the running service's
# pid, the binary to start it from and its port. It records what arrived on
# the remote side (UNIT, NOTE, the STADO_ variables) in DIR/remote, kills
# the old service process and starts a new one, detached from this session.
set -eu
dir=$1
{
	printf 'unit=%s\n' "$2"
	printf 'note=%s\n' "$3"
	env | grep '^STADO_' | sort
} >"$dir/remote.tmp"
mv "$dir/remote.tmp" "$dir/remote"
old=$(cat "$dir/pid")
rm -f "$dir/pid"
kill "$old"
STADO_CHANNEL_TEST_SERVICE=$dir nohup "$(cat "$dir/bin")" </dev/null >>"$dir/service.log" 2>&1 &
i=0
while [ ! -s "$dir/pid" ]; do
	i=$((i + 1))
	if [ $i -gt 200 ]; then
		echo "the service did not come back within 10s" >&2
		exit 1
	fi
	sleep 0.05
done
echo "restarted $2: pid $(cat "$dir/pid")"
