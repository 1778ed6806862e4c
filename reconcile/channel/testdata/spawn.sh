#!/bin/sh
# spawn.sh DIR MODE: leaves a background child behind (writing the pids to
# DIR/leader.pid and DIR/child.pid) that keeps the output pipe open.
#   hang:   the leader then sleeps far past any fence deadline.
#   exit:   the leader exits 0 at once; its child must not outlive it.
#   escape: the child leaves the process group (setsid); the leader waits
#           until it has left, so the group kill cannot race the escape,
#           then exits 0.
dir=$1
echo $$ >"$dir/leader.tmp" && mv "$dir/leader.tmp" "$dir/leader.pid"
if [ "$2" = escape ]; then
	setsid sh -c ': >"$1/escaped"; exec sleep 30' escape "$dir" &
else
	sleep 30 &
fi
echo $! >"$dir/child.tmp" && mv "$dir/child.tmp" "$dir/child.pid"
echo "spawned $!"
if [ "$2" = escape ]; then
	while [ ! -e "$dir/escaped" ]; do sleep 0.01; done
fi
if [ "$2" = hang ]; then
	sleep 30
fi
exit 0
