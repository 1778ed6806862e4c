#!/usr/bin/env bash
# bench/run.sh full|quick — stado's performance benchmarks (`make bench`,
# `make bench-quick`). Installs what it needs when it is missing (Versity
# Gateway, Debian's etcd-server and redis-server), runs
#   1. ticks at fleet scale on fs and on S3 with added latency,
#   2. lease take+release beside etcd and Redis,
#   3. the 100,000-service tick profiled on the code before the performance
#      changes (BENCH_BEFORE_REV) and on the working tree,
# and writes docs/benchmarks.md from the results (kept in bench/results/).
set -euo pipefail
mode="${1:-}"
case "$mode" in
full | quick | smoke) ;;
*)
	echo "usage: bench/run.sh full|quick|smoke (it replaces bench/results/ and docs/benchmarks.md)" >&2
	exit 2
	;;
esac
cd "$(dirname "$0")/.."
root="$(pwd)"
export PATH="$(go env GOPATH)/bin:$PATH"
before_rev="${BENCH_BEFORE_REV:-bed7594}"
results="$root/bench/results"
mkdir -p "$results"
rm -f "$results"/*.json "$results"/*.txt
work="$(mktemp -d "${TMPDIR:-/tmp}/stado-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- what the benchmarks need, installed quietly when missing -------------
if ! command -v versitygw >/dev/null 2>&1; then
	log "installing versitygw v1.8.0 (the S3 server)"
	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
if ! command -v etcd >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
	log "installing etcd-server and redis-server (Debian)"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server redis-server >/dev/null
fi

case "$mode" in
full)
	scale_args=(-sizes 1000,10000,100000 -stores fs,s3+5ms,s3+20ms -runs 5 -seq-runs 5 -large-seq-runs 3)
	lease_args=(-reps 5 -duration 3s)
	ba_rounds=2 ba_runs=3 ba_size=100000 wide=0 micro_count=6
	;;
quick)
	scale_args=(-sizes 1000,10000,100000 -stores fs,s3+5ms,s3+20ms -runs 3 -seq-runs 3 -large-seq-runs -1 -skip s3+20ms/100000)
	lease_args=(-reps 3 -duration 2s)
	ba_rounds=1 ba_runs=3 ba_size=100000 wide=0 micro_count=5
	;;
smoke) # checks this script end to end in a minute; its numbers mean little
	scale_args=(-sizes 1000 -stores fs,s3+5ms -runs 1 -seq-runs 1)
	lease_args=(-reps 1 -duration 1s)
	ba_rounds=1 ba_runs=1 ba_size=10000 wide=0 micro_count=1
	;;
*)
	echo "usage: bench/run.sh full|quick|smoke" >&2
	exit 2
	;;
esac

bin="$work/stado-bench"
log "building bench/cmd/stado-bench"
go build -o "$bin" ./bench/cmd/stado-bench

cmds="$results/commands.txt"
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ): make bench$([ "$mode" = quick ] && echo -quick) (bench/run.sh $mode), which ran:"
	echo "go build -o stado-bench ./bench/cmd/stado-bench"
} >"$cmds"
run() { # run CMD...: record it (temporary paths shortened), run it
	printf '%s\n' "$*" | sed "s|$work/||g; s|$root/||g" >>"$cmds"
	"$@"
}

# --- the machine and the code ----------------------------------------------
# The code measured: HEAD, and whether the working tree differs from it
# outside what this script itself writes.
code_rev="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain -- . ':!bench/results' ':!docs/benchmarks.md' 2>/dev/null)" ]; then
	code_rev="$code_rev plus uncommitted changes in the working tree"
fi
env_file="$results/env.txt"
{
	echo "date (UTC): $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "mode: $mode"
	echo "commit: $code_rev"
	echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
	echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr)"
	echo "filesystem of the stores: $(findmnt -no FSTYPE,OPTIONS -T "$work" 2>/dev/null || echo unknown)"
	dev="$(basename "$(findmnt -no SOURCE -T "$work" 2>/dev/null)")"
	if [ -r "/sys/fs/ext4/$dev/journal_task" ]; then
		echo "ext4 journal: $([ "$(cat "/sys/fs/ext4/$dev/journal_task")" = "<none>" ] && echo "none (no jbd2 task for $dev)" || echo "yes ($(cat "/sys/fs/ext4/$dev/journal_task"))")"
	fi
	echo "Go: $(go version | cut -d' ' -f3-)"
	echo "S3 server: Versity Gateway (versitygw on PATH; make tools installs v1.8.0), posix backend"
	echo "etcd: $(etcd --version 2>/dev/null | head -1)"
	echo "Redis: $(redis-server --version 2>/dev/null)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$env_file"
# The machine may be shared: sample its load (1-minute average) every 10 s,
# and count the CPU time every process used, to state beside the results how
# much of it was not the benchmark's.
busy() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9}' /proc/stat; }
busy_start=$(busy)
(while :; do cut -d' ' -f1 /proc/loadavg >>"$work/load.txt"; sleep 10; done) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true; rm -rf "$work"' EXIT

# --- 1. ticks at scale -------------------------------------------------------
log "1. ticks at fleet scale: ${scale_args[*]}"
run "$bin" scale "${scale_args[@]}" -work "$work/scale" -out "$results/scale.json"

# --- 2. leases ----------------------------------------------------------------
log "2. lease take+release: ${lease_args[*]}"
run "$bin" lease "${lease_args[@]}" -work "$work/lease" -out "$results/lease.json"

# --- 3. before and after, profiled ------------------------------------------
log "3. the 100,000-service tick before ($before_rev) and after (working tree)"
before_src="$work/before-src"
mkdir -p "$before_src"
git archive "$before_rev" | tar -x -C "$before_src"
rm -rf "$before_src/bench"
cp -r "$root/bench" "$before_src/bench"
rm -rf "$before_src/bench/results"
(cd "$before_src" && go build -o "$work/stado-bench-before" ./bench/cmd/stado-bench)
echo "git archive $before_rev | tar -x -C before && cp -r bench before/ && (cd before && go build -o stado-bench-before ./bench/cmd/stado-bench)" >>"$cmds"
mkdir -p "$work/ba"
for round in $(seq "$ba_rounds"); do
	for which in before after; do
		b="$bin"
		[ "$which" = before ] && b="$work/stado-bench-before"
		run "$b" scale -sizes "$ba_size" -stores fs -runs "$ba_runs" -seq-runs 0 -variants parallel \
			-profiles "$work/ba/prof-$which" -work "$work/ba/w" -out "$results/ba-$which-$round.json"
	done
done
before_runs="" after_runs=""
for round in $(seq "$ba_rounds"); do
	before_runs="$before_runs${before_runs:+,}$results/ba-before-$round.json"
	after_runs="$after_runs${after_runs:+,}$results/ba-after-$round.json"
done
for which in before after; do
	b="$bin"
	[ "$which" = before ] && b="$work/stado-bench-before"
	{
		go tool pprof -top -cum -nodecount=30 "$b" "$work/ba/prof-$which/tick-fs-$ba_size.cpu.pprof" 2>/dev/null
		echo
		echo "heap, bytes allocated during the tick (pprof -sample_index=alloc_space -top):"
		go tool pprof -sample_index=alloc_space -top -nodecount=12 "$b" "$work/ba/prof-$which/tick-fs-$ba_size.heap.pprof" 2>/dev/null
	} | grep -v -e '^File:' -e '^Build ID:' -e '^Time:' >"$results/profile-$which.txt"
done
echo "go tool pprof -top -cum -nodecount=30 stado-bench[-before] tick-fs-100000.cpu.pprof" >>"$cmds"

# --- 3c. the micro-benchmarks of what changed, before and after (benchstat) ---
log "3c. micro-benchmarks of the changed code, before and after"
if ! command -v benchstat >/dev/null 2>&1; then
	log "installing benchstat (golang.org/x/perf)"
	go install golang.org/x/perf/cmd/benchstat@latest
fi
micro_pkgs=(./reports/ ./objstore/ ./reconcile/beacon/)
micro_re='^(BenchmarkMarshal100k|BenchmarkFSGetLarge|BenchmarkDecode)$'
# The benchmarks were added with the changes: the code before gets the same
# benchmark files.
cp reports/encode_test.go "$before_src/reports/"
cp objstore/fs_bench_test.go "$before_src/objstore/"
cp reconcile/beacon/decode_bench_test.go "$before_src/reconcile/beacon/"
(cd "$before_src" && go test -run '^$' -bench "$micro_re" -benchmem -count "$micro_count" "${micro_pkgs[@]}") >"$results/micro-before.txt"
go test -run '^$' -bench "$micro_re" -benchmem -count "$micro_count" "${micro_pkgs[@]}" >"$results/micro-after.txt"
echo "go test -run '^\$' -bench '$micro_re' -benchmem -count $micro_count ${micro_pkgs[*]}   # in before/ (with the benchmark files copied in) and in the working tree" >>"$cmds"
(cd "$results" && benchstat micro-before.txt micro-after.txt) >"$results/micro-benchstat.txt"
echo "benchstat micro-before.txt micro-after.txt" >>"$cmds"

wide_args=()
if [ "$wide" = 1 ]; then
	log "3b. beacon reads 256 at a time on S3 + 20 ms"
	run "$bin" scale -sizes 100000 -stores s3+20ms -runs 3 -seq-runs 0 -variants parallel,parallel-256 \
		-work "$work/wide" -out "$results/wide.json"
	wide_args=(-wide "$results/wide.json")
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$env_file"
kill "$sampler" 2>/dev/null || true
busy_end=$(busy)
times >"$work/times.txt" # not in a pipeline: a subshell's children are not ours
bench_cpu=$(tail -1 "$work/times.txt" | awk '{ for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } print s }')
echo "CPU time used on the machine during the run: $(awk -v a="$busy_start" -v b="$busy_end" -v c="$bench_cpu" -v hz="$(getconf CLK_TCK)" 'BEGIN {
	all = (b - a) / hz; other = all - c
	printf "%.0f s by all processes (/proc/stat), %.0f s by the benchmark'"'"'s (getrusage of its children)", all, c
	if (other < 0.03 * all) printf ": other work used next to none (the two counts differ by less than their precision)"
	else printf ": other work used about %.0f s", other
}')" >>"$env_file"
echo "load (1-minute average, sampled every 10 s during the run; 2.0 = both cores busy): $(sort -n "$work/load.txt" | awk '{a[NR]=$1} END {if (NR) printf "median %s, 90th percentile %s, max %s, over %d samples", a[int((NR+1)/2)], a[int(NR*0.9+0.5)], a[NR], NR}')" >>"$env_file"

# --- the document ----------------------------------------------------------
echo "stado-bench render ... -out docs/benchmarks.md" >>"$cmds"
"$bin" render -scale "$results/scale.json" -lease "$results/lease.json" \
	-before "$before_runs" -after "$after_runs" \
	-before-label "$before_rev" -after-label "$code_rev" \
	-profile-before "$results/profile-before.txt" -profile-after "$results/profile-after.txt" \
	-micro "$results/micro-benchstat.txt" \
	"${wide_args[@]}" -env "$env_file" -commands "$cmds" -out docs/benchmarks.md
log "wrote docs/benchmarks.md"
