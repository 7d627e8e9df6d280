#!/usr/bin/env bash
# Soak: SLOTS executions a second (default 1,000) of an HTTP job whose answer
# is BYTES (default 4096) for MINUTES (default 30), on three `kira etcd`
# processes with their defaults and three `kira run` members, all on this
# machine. Every 15 s it appends to OUT (default soak.csv) each etcd's
# largest database size and size in use, each member's resident memory and
# goroutines, and the executions, skipped fires and failures so far. The
# figures in docs/benchmarks.md ("Thirty minutes at 1,000 a second") come
# from it. Ports 42379-42384 and 43090-43092 must be free.
set -eu
SLOTS=${SLOTS:-1000} BYTES=${BYTES:-4096} MINUTES=${MINUTES:-30} OUT=${OUT:-soak.csv}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/kira" ./cmd/kira)
# The job's receiver: an HTTP server answering BYTES bytes.
mkdir "$work/answer"
cat > "$work/answer/main.go" <<GO
package main

import (
	"net/http"
	"strings"
)

func main() {
	answer := []byte(strings.Repeat("x", $BYTES))
	http.ListenAndServe("127.0.0.1:43099", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(answer) }))
}
GO
(cd "$work/answer" && printf 'module answer\n\ngo 1.26\n' > go.mod && go build -o ../answer-server .)
"$work/answer-server" &
peers=e0=http://127.0.0.1:42380,e1=http://127.0.0.1:42382,e2=http://127.0.0.1:42384
for i in 0 1 2; do
  "$work/kira" etcd --name e$i --data-dir "$work/e$i" --listen-client-urls http://127.0.0.1:$((42379 + 2*i)) \
    --listen-peer-urls http://127.0.0.1:$((42380 + 2*i)) --initial-cluster $peers > "$work/e$i.log" 2>&1 &
done
sleep 5
cat > "$work/catalog.yaml" <<YAML
cluster: soak
jobs:
  - name: load
    schedule: "@every 1s"
    partitions: $SLOTS
    http: {url: "http://127.0.0.1:43099/", method: GET}
YAML
etcd=http://127.0.0.1:42379,http://127.0.0.1:42381,http://127.0.0.1:42383
for i in 0 1 2; do
  "$work/kira" run --etcd $etcd --catalog "$work/catalog.yaml" --name m$i --http 127.0.0.1:$((43090 + i)) --log-level warn > "$work/m$i.log" 2>&1 &
done
sleep 30
# metric URL NAME [LABEL]: the sum of NAME's samples (with LABEL in them, if given).
metric() { curl -s "$1" | awk -v n="$2" -v l="${3:-}" '$1 ~ "^"n"([{]|$)" && index($1, l) {s += $2} END {printf "%.0f", s}'; }
echo "t_s,db_bytes_max,db_in_use_max,rss_m0,rss_m1,rss_m2,goroutines_m0,goroutines_m1,goroutines_m2,executions_total,skipped_total,failed_total" > "$OUT"
start=$(date +%s)
while [ $(( $(date +%s) - start )) -le $(( MINUTES * 60 )) ]; do
  db=0 inuse=0 row=""
  for i in 0 1 2; do
    url=http://127.0.0.1:$((42379 + 2*i))/metrics
    v=$(metric $url etcd_mvcc_db_total_size_in_bytes); [ "$v" -gt "$db" ] && db=$v
    v=$(metric $url etcd_mvcc_db_total_size_in_use_in_bytes); [ "$v" -gt "$inuse" ] && inuse=$v
  done
  for m in process_resident_memory_bytes go_goroutines; do
    for i in 0 1 2; do row="$row,$(metric http://127.0.0.1:$((43090 + i))/metrics $m)"; done
  done
  ex=0 sk=0 fa=0
  for i in 0 1 2; do
    url=http://127.0.0.1:$((43090 + i))/metrics
    ex=$((ex + $(metric $url kira_executions_total))); sk=$((sk + $(metric $url kira_fires_skipped_total)))
    fa=$((fa + $(metric $url kira_executions_total 'outcome="failed"')))
  done
  echo "$(( $(date +%s) - start )),$db,$inuse$row,$ex,$sk,$fa" >> "$OUT"
  sleep 15
done
