#!/bin/bash
# What an idle group costs the dev broker once it has settled: the requests
# it answers a second (all clients, from its own count) and its CPU, over a
# window that starts SETTLE seconds after the last member started (neli-bench's
# scale scenario measures right after every member says "standby:", while
# the cold members are still leaving the group). One line of figures, then
# where they go:
# - the requests a second by API, and by member (the busiest three, and the
#   median member: a cold one in a large group);
# - the broker's CPU split between librdkafka's mock thread (`rdk:mock`,
#   which serves every request the dev broker forwards: it polls every
#   connection it holds at each wake-up; since 2026-11-30 a broker's clients
#   share 8 of them, before that each client connection had its own) and
#   the rest (the forwarder's own threads), and the client connections it
#   holds;
# - the members' CPU (% of a core) and RSS (MiB), median and largest.
# With IDLE_CONNS=K in the environment, a second window follows on the same
# broker and group with K more client connections open and idle (no
# request on them): what the connections alone cost.
#
#   proof/idle-steady.sh NELI_RUN PORT N [SETTLE] [WINDOW]
#
# starts a dev broker on 127.0.0.1:PORT, a leader and N standbys at the
# product's defaults (50 ms apart), and stops them all at the end.
set -eu
BIN=$1; PORT=$2; N=$3; SETTLE=${4:-60}; WIN=${5:-20}; IDLE_CONNS=${IDLE_CONNS:-0}
D=$(mktemp -d); pids=(); members=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$D"' EXIT
"$BIN" dev-broker --listen "127.0.0.1:$PORT" --control "$D/ctl" > "$D/broker.log" 2>&1 &
broker=$!; pids+=("$broker")
sleep 1
for i in $(seq -w 0 "$N"); do
  "$BIN" -b "127.0.0.1:$PORT" -g idle --name "m$i" -- sleep 100000 > "$D/m$i.log" 2>&1 &
  pids+=("$!"); members+=("$!")
  sleep 0.05
done
sleep "$SETTLE"
hz=$(getconf CLK_TCK)
# CPU ticks of a process (its threads summed), and of its threads named $2.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
thread_ticks() { cat /proc/"$1"/task/*/stat 2>/dev/null | awk -v n="($2)" '$2 == n {s += $14 + $15} END {print s + 0}'; }
requests() { "$BIN" dev-broker event --control "$D/ctl" requests; }
conns() { ss -tnH state established "( sport = :$PORT )" | wc -l; }
# One window: $1 names it in the output.
window() {
  local c1 m1 t1 c2 m2 t2 s
  c1=$(ticks "$broker"); m1=$(thread_ticks "$broker" rdk:mock); requests > "$D/r1"; t1=$(date +%s.%N)
  for p in "${members[@]}"; do [ -e "/proc/$p/stat" ] && echo "$p $(ticks "$p")"; done > "$D/u1"
  sleep "$WIN"
  c2=$(ticks "$broker"); m2=$(thread_ticks "$broker" rdk:mock); requests > "$D/r2"; t2=$(date +%s.%N)
  for p in "${members[@]}"; do [ -e "/proc/$p/stat" ] && echo "$p $(ticks "$p") $(awk '/^VmRSS/ {print $2}' "/proc/$p/status")"; done > "$D/u2"
  s=$(echo "$t2 - $t1" | bc)
  # Requests in the window, by "CLIENT API".
  awk 'NR == FNR {was[$1 " " $2] = $3; next} {print $1, $2, $3 - was[$1 " " $2]}' "$D/r1" "$D/r2" > "$D/dr"
  awk -v r="$(awk '{s += $3} END {print s}' "$D/dr")" -v c="$((c2 - c1))" -v m="$((m2 - m1))" -v s="$s" \
      -v n="$((10#$N + 1))" -v hz="$hz" -v cold="$(grep -l "a cold standby: leaving" "$D"/m*.log | wc -l)" \
      -v load="$(cut -d' ' -f1-3 /proc/loadavg)" -v bin="$BIN" -v name="$1" -v conns="$(conns)" \
      'BEGIN {printf "%s%s: %d members (%d cold): %.1f requests/s, %.2f per member, broker CPU %.2f %% of a core (load %s)\n",
              bin, name, n, cold, r / s, r / s / n, 100 * c / hz / s, load;
              printf "  broker CPU: mock thread %.2f %%, the rest %.2f %%; %d client connections\n",
              100 * m / hz / s, 100 * (c - m) / hz / s, conns}'
  awk -v s="$s" '{a[$2] += $3} END {for (k in a) if (a[k] > 0) printf " %s %.2f,", k, a[k] / s}' "$D/dr" |
    sed 's/^/  requests\/s by API:/; s/,$/\n/'
  awk -v s="$s" '{m = $1; sub(/-roster$/, "", m); a[m] += $3} END {for (k in a) printf "%.2f %s\n", a[k] / s, k}' "$D/dr" |
    sort -rn > "$D/bym"
  awk '{v[NR] = $1} NR <= 3 {top = top sprintf(" %s %.2f,", $2, $1)} END {printf "  requests/s by member (its clients summed): busiest%s median %.2f\n", top, v[int((NR + 1) / 2)]}' "$D/bym"
  join "$D/u1" "$D/u2" | awk -v s="$s" -v hz="$hz" '{print 100 * ($3 - $2) / hz / s, $4 / 1024}' > "$D/mu"
  sort -n "$D/mu" | awk '{v[NR] = $1} END {printf "  members: CPU median %.3f %%, largest %.3f %%, summed", v[int((NR + 1) / 2)], v[NR]}'
  awk '{s += $1} END {printf " %.2f %% of a core;", s}' "$D/mu"
  sort -n -k2 "$D/mu" | awk '{v[NR] = $2} END {printf " RSS median %.1f MiB, largest %.1f MiB\n", v[int((NR + 1) / 2)], v[NR]}'
}
window ""
if [ "$IDLE_CONNS" -gt 0 ]; then
  # K connections opened and left idle, held by one process (its own fds).
  base=$(conns)
  (for _ in $(seq "$IDLE_CONNS"); do exec {fd}<>"/dev/tcp/127.0.0.1/$PORT"; done; exec sleep 100000) &
  pids+=("$!")
  until [ "$(conns)" -ge "$((base + IDLE_CONNS))" ]; do sleep 0.5; done
  sleep 5
  window " + $IDLE_CONNS idle connections"
fi
