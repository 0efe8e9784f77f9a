#!/usr/bin/env bash
# Syscalls per HTTP request of each server of benches/io.rs,
# counted by `perf stat -p` on the server process only (wrk runs apart),
# divided by wrk's request count for the same window.
#
#   scripts/io-syscalls.sh [WORKERS] [SECS] [CONNS]
#
# Needs wrk and perf (Debian: wrk, linux-perf). Builds the bench first.
set -euo pipefail
workers=${1:-2}
secs=${2:-3}
conns=${3:-64}
cd "$(dirname "$0")/.."
# The bench's executable, from cargo (tests/io.rs built in release by
# scripts/under-hog.sh has the same io-* name in target/release/deps).
bin=$(cargo bench --features hyper --bench io --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]==["bench"]:
        print(m["executable"])' | tail -1)
events=raw_syscalls:sys_enter
for s in recvfrom read sendto write writev epoll_wait epoll_pwait epoll_ctl futex accept4 close; do
    events+=",syscalls:sys_enter_$s"
done
printf '%-16s %10s' server req/s
for s in all recvfrom read sendto write writev epoll_wait epoll_pwait epoll_ctl futex; do
    printf ' %9s' "$s"
done
echo
for kind in hwsched tokio async-executor hwsched-asyncio; do
    out=$(mktemp)
    "$bin" --serve "$kind" --only http --workers "$workers" >"$out" &
    pid=$!
    for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
    addr=$(head -1 "$out")
    # Warm up (connections made, caches warm), then count.
    wrk -t1 -c"$conns" -d1s "http://$addr/" >/dev/null
    perf stat -x, -e "$events" -p "$pid" -o "$out.perf" -- sleep "$secs" &
    ppid=$!
    reqs=$(wrk -t1 -c"$conns" -d"${secs}s" "http://$addr/" | awk '/requests in/ {print $1}')
    wait "$ppid" || true
    kill "$pid"; wait "$pid" 2>/dev/null || true
    printf '%-16s %10.0f' "$kind" "$(echo "$reqs / $secs" | bc -l)"
    for e in raw_syscalls:sys_enter recvfrom read sendto write writev epoll_wait epoll_pwait epoll_ctl futex; do
        n=$(awk -F, -v e="$e" '$3 ~ e"$" || $3 ~ "sys_enter_"e"$" {print $1}' "$out.perf" | head -1)
        printf ' %9.2f' "$(echo "${n:-0} / $reqs" | bc -l)"
    done
    echo
    rm -f "$out" "$out.perf"
done
