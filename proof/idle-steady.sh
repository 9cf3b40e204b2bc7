#!/bin/bash
# What an idle group costs the dev broker once it has settled: the requests
# it answers a second (all clients, from its own count) and its CPU, over a
# window that starts SETTLE seconds after the last member started (neli-bench's
# scale scenario measures right after every member says "standby:", while
# the cold members are still leaving the group). One line of figures.
#
#   proof/idle-steady.sh NELI_RUN PORT N [SETTLE] [WINDOW]
#
# starts a dev broker on 127.0.0.1:PORT, a leader and N standbys at the
# product's defaults (50 ms apart), and stops them all at the end.
set -eu
BIN=$1; PORT=$2; N=$3; SETTLE=${4:-60}; WIN=${5:-20}
D=$(mktemp -d); pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$D"' EXIT
"$BIN" dev-broker --listen "127.0.0.1:$PORT" --control "$D/ctl" > "$D/broker.log" 2>&1 &
broker=$!; pids+=("$broker")
sleep 1
for i in $(seq -w 0 "$N"); do
  "$BIN" -b "127.0.0.1:$PORT" -g idle --name "m$i" -- sleep 100000 > "$D/m$i.log" 2>&1 &
  pids+=("$!")
  sleep 0.05
done
sleep "$SETTLE"
ticks() { awk '{print $14 + $15}' "/proc/$broker/stat"; }
total() { "$BIN" dev-broker event --control "$D/ctl" requests | awk '{s += $3} END {print s}'; }
c1=$(ticks); r1=$(total); t1=$(date +%s.%N)
sleep "$WIN"
c2=$(ticks); r2=$(total); t2=$(date +%s.%N)
cold=$(grep -l "a cold standby: leaving" "$D"/m*.log | wc -l)
hz=$(getconf CLK_TCK)
awk -v r="$((r2 - r1))" -v c="$((c2 - c1))" -v s="$(echo "$t2 - $t1" | bc)" -v n="$((10#$N + 1))" -v hz="$hz" \
    -v cold="$cold" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" -v bin="$BIN" \
    'BEGIN {printf "%s: %d members (%d cold): %.1f requests/s, %.2f per member, broker CPU %.2f %% of a core (load %s)\n",
            bin, n, cold, r / s, r / s / n, 100 * c / hz / s, load}'
