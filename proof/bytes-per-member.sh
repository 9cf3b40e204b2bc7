#!/bin/bash
# What each member of a settled group reads from the dev broker: the bytes
# the broker sends on each member's connections (the kernel's per-socket
# bytes_sent, `ss -ti`), summed by member, over WINDOW seconds idle, then
# over WINDOW seconds from a graceful stop (SIGTERM) of the holder. Prints
# the holder, the busiest members and the median member (a cold one in a
# large group): bytes a second idle, and the bytes the handover added (the
# second window less the first). The figures of the 10,000-member model
# (docs/how-it-works.md).
#
#   proof/bytes-per-member.sh NELI_RUN PORT N [SETTLE] [WINDOW]
#
# starts a dev broker on 127.0.0.1:PORT, a leader and N standbys at the
# product's defaults (50 ms apart), and stops them all at the end.
set -eu
BIN=$1; PORT=$2; N=$3; SETTLE=${4:-60}; WIN=${5:-15}
D=$(mktemp -d); pids=()
trap 'kill "${pids[@]}" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
"$BIN" dev-broker --listen "127.0.0.1:$PORT" --control "$D/ctl" > "$D/broker.log" 2>&1 &
pids+=("$!")
sleep 1
for i in $(seq -w 0 "$N"); do
  "$BIN" -b "127.0.0.1:$PORT" -g bytes --name "m$i" -- sleep 100000 > "$D/m$i.log" 2>&1 &
  pids+=("$!"); echo "$! m$i" >> "$D/names"
  sleep 0.05
done
sort -o "$D/names" "$D/names"
sleep "$SETTLE"
# "PEER BYTES_SENT" for each connection the broker accepted (ss prints a
# socket's counters on a line of their own).
snap() {
  ss -tinH state established "( sport = :$PORT )" |
    awk '/^[^ \t]/ {if (l) print l; l = $0; next} {l = l " " $0} END {if (l) print l}' |
    awk '{peer = $4; sent = 0; for (i = 5; i <= NF; i++) if ($i ~ /^bytes_sent:/) sent = substr($i, 12); print peer, sent}' |
    sort
}
# "PEER PID" for each of the members' connections to the broker.
owners() {
  ss -tnpH state established "( dport = :$PORT )" |
    sed -n 's/.* \([0-9.]*:[0-9]*\) *[0-9.]*:'"$PORT"' .*pid=\([0-9]*\),.*/\1 \2/p' | sort
}
# Bytes sent between two snapshots, by member name (connections open at both).
by_member() {
  join "$1" "$2" | awk '{print $1, $3 - $2}' | join - "$D/owners" | awk '{print $3, $2}' | sort |
    join - "$D/names" | awk '{s[$3] += $2} END {for (m in s) print m, s[m]}' | sort
}
# Who owns each connection, from before the holder stops.
snap > "$D/s0"; owners > "$D/owners"; sleep "$WIN"; snap > "$D/s1"; owners >> "$D/owners"
sort -u -o "$D/owners" "$D/owners"
holder=$(grep -l "child started" "$D"/m*.log | head -1 | xargs basename | sed 's/\.log$//')
kill -TERM "$(awk -v m="$holder" '$2 == m {print $1}' "$D/names")"
sleep "$WIN"; snap > "$D/s2"
by_member "$D/s0" "$D/s1" > "$D/idle"; by_member "$D/s1" "$D/s2" > "$D/stop"
join "$D/idle" "$D/stop" | awk -v w="$WIN" '{print $1, $2 / w, $3 - $2}' | sort -k2 -rn > "$D/rows"
cold=$(grep -l "a cold standby: leaving" "$D"/m*.log | wc -l)
echo "$((10#$N + 1)) members ($cold cold), load $(cut -d' ' -f1-3 /proc/loadavg); the holder $holder stopped"
echo "bytes the broker sent: member, a second idle, added by the handover"
awk -v h="$holder" -v w="$WIN" '$1 == h {printf "  holder %s: %.0f B/s, -\n", $1, $2 / w}' "$D/idle"
awk -v h="$holder" '$1 != h' "$D/rows" | head -3 | awk '{printf "  busiest %s: %.0f B/s, %d B\n", $1, $2, $3}'
awk -v h="$holder" '$1 != h' "$D/rows" | sort -k2 -n |
  awk '{v[NR] = $2; a[NR] = $3} END {m = int((NR + 1) / 2); printf "  median member: %.0f B/s, %d B\n", v[m], a[m]}'
