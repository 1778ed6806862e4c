#!/bin/sh
# fail.sh CODE: prints more output than a channel keeps, ending with a
# terminal escape and a last line, then exits with status CODE.
i=0
while [ $i -lt 200 ]; do
	echo "noise line $i: ........................................"
	i=$((i + 1))
done
printf 'clear screen \033[2J then\n'
echo "last line: unit is broken" >&2
exit "$1"
