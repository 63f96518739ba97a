#!/usr/bin/env bash
# A model larger than the memory it may use still runs: weights stream from
# disk through the page cache.  Runs `zerolayer bench` (tg only) inside a
# memory cgroup (v1 memory.limit_in_bytes or v2 memory.max; needs root) for
# several --prefetch-layers depths and reports tokens/s and peak memory.
#   bench/memlimit.sh MODEL LIMIT_MIB [ZEROLAYER] [THREADS]
set -euo pipefail
MODEL=$1; LIMIT=$2; ZL=${3:-build/bin/zerolayer}; T=${4:-2}
N=${N:-16}
CG=/sys/fs/cgroup/memory/zl-memlimit-$$
V2=0
if [ ! -d /sys/fs/cgroup/memory ]; then V2=1; CG=/sys/fs/cgroup/zl-memlimit-$$; fi
mkdir -p "$CG"
trap 'rmdir "$CG" 2>/dev/null || true' EXIT
if [ $V2 = 1 ]; then echo $((LIMIT << 20)) > "$CG/memory.max"; else echo $((LIMIT << 20)) > "$CG/memory.limit_in_bytes"; fi
echo "model $(basename "$MODEL") ($(($(stat -c %s "$MODEL") >> 20)) MiB), memory limit $LIMIT MiB, $T threads, tg$N"
echo
echo "| prefetch layers | tg tok/s | peak memory (cgroup) MiB |"
echo "|---|---|---|"
for pf in ${PREFETCH:-0 2 4}; do
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true
  if [ $V2 = 0 ]; then echo 0 > "$CG/memory.max_usage_in_bytes" 2>/dev/null || true; fi
  out=$(sh -c "echo \$\$ > $CG/cgroup.procs; exec $ZL bench -m $MODEL -p 0 -n $N -t $T -r 1 --prefetch-layers $pf --json")
  tps=$(echo "$out" | grep -o '"tps_mean":[0-9.]*' | head -1 | cut -d: -f2)
  if [ $V2 = 0 ]; then peak=$(( $(cat "$CG/memory.max_usage_in_bytes") >> 20 )); else peak=$(( $(cat "$CG/memory.peak" 2>/dev/null || echo 0) >> 20 )); fi
  echo "| $pf | $tps | $peak |"
done
