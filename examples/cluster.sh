#!/usr/bin/env bash
# Kira on one machine as it runs in production: three `kira etcd` processes as one
# etcd cluster, three `kira run` members; then a kill -9 of one member and a
# SIGTERM of another, printing who took their slots over and how fast.
#
#   examples/cluster.sh                 # builds kira with go, or uses $KIRA
#   KIRA_CLUSTER_PORTS="2379 2381 2383 2380 2382 2384" examples/cluster.sh
#                                       # etcd's client ports, then its peer ports
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

KIRA=${KIRA:-}
if [ -z "$KIRA" ]; then
  go build -o "$work/kira" ./cmd/kira
  KIRA=$work/kira
fi
read -r c0 c1 c2 p0 p1 p2 <<<"${KIRA_CLUSTER_PORTS:-2379 2381 2383 2380 2382 2384}"
initial="e0=http://127.0.0.1:$p0,e1=http://127.0.0.1:$p1,e2=http://127.0.0.1:$p2"
i=0
for pair in "$c0 $p0" "$c1 $p1" "$c2 $p2"; do
  set -- $pair
  "$KIRA" etcd --name "e$i" --data-dir "$work/e$i" \
    --listen-client-urls "http://127.0.0.1:$1" --advertise-client-urls "http://127.0.0.1:$1" \
    --listen-peer-urls "http://127.0.0.1:$2" --initial-advertise-peer-urls "http://127.0.0.1:$2" \
    --initial-cluster "$initial" >"$work/e$i.log" 2>&1 &
  pids+=($!)
  i=$((i + 1))
done
E="http://127.0.0.1:$c0,http://127.0.0.1:$c1,http://127.0.0.1:$c2"
cat >"$work/catalog.yaml" <<'YAML'
cluster: example
membership: {lease_ttl: 2s}
jobs:
  - {name: tick, schedule: "@every 1s", partitions: 30, command: ["true"]}
YAML
until "$KIRA" apply -f "$work/catalog.yaml" --etcd "$E" >/dev/null 2>&1; do sleep 0.2; done
echo "etcd: 3 kira etcd processes at $E"

declare -A member
for n in a b c; do
  "$KIRA" run --cluster example --etcd "$E" --name "$n" >"$work/$n.log" 2>&1 &
  member[$n]=$!
  pids+=($!)
done

# owners prints one line per slot, "partition owner-name", from kira status.
owners() {
  "$KIRA" status --etcd "$E" --cluster example 2>/dev/null | awk '
    /^MEMBER/ { section = "members"; next }
    /^JOB/    { section = "slots"; next }
    NF == 0   { section = ""; next }
    section == "members" { name[$1] = $2 }
    section == "slots"   { print $2, ($3 in name ? name[$3] : "(none)") }'
}
# settled waits until the members named are exactly the live ones (a killed
# member's record goes with its lease), each leads slots, and every slot is
# led by one of them; it prints the owners.
settled() {
  local live="$*" deadline=$(($(date +%s) + 30))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    local o
    o=$(owners)
    if [ "$(echo "$o" | wc -l)" -eq 30 ] && echo "$o" | awk -v live="$live" '
        BEGIN { n = split(live, want, " ") }
        { led[$2]++ }
        END {
          for (i = 1; i <= n; i++) if (!(want[i] in led)) exit 1
          for (m in led) { ok = 0; for (i = 1; i <= n; i++) if (m == want[i]) ok = 1; if (!ok) exit 1 }
        }'; then
      echo "$o"
      return 0
    fi
    sleep 0.1
  done
  echo "slots not settled on: $live" >&2
  owners >&2
  return 1
}
ms() { echo $(($(date +%s%N) / 1000000)); }
show() { awk '{ n[$2]++ } END { for (m in n) printf "  %s leads %d slots\n", m, n[m] }' | sort; }

settled a b c | show
echo "kill -9 of member a"
t0=$(ms)
kill -9 "${member[a]}"
wait "${member[a]}" 2>/dev/null || true
after=$(settled b c)
echo "every slot owned by b and c $(($(ms) - t0)) ms after the kill (lease TTL 2 s)"
echo "$after" | show
echo "SIGTERM to member b"
t0=$(ms)
kill -TERM "${member[b]}"
after=$(settled c)
echo "every slot owned by c $(($(ms) - t0)) ms after the SIGTERM (a graceful handover)"
echo "$after" | show
