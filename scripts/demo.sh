#!/usr/bin/env bash
# A narrated run of neli-run on the embedded dev broker: three members elect
# one leader, the leader stops gracefully (a standby takes over at once), then
# the next leader is killed with SIGKILL (its command dies with it, and a
# standby takes over after the session timeout).
#
# usage: scripts/demo.sh        (builds neli-run first; needs nothing else)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release
bin=$PWD/target/release/neli-run
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
brokers=127.0.0.1:$port
touch "$work/leaders"
pids=()
broker=
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    kill "$broker" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
took() { local d=$(( $(now_ms) - $1 )); printf '%d.%02ds' $((d / 1000)) $((d % 1000 / 10)); }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
leader() { tail -n 1 "$work/leaders" 2>/dev/null | cut -d' ' -f1; }
wait_for_leaders() { # wait until $1 leaderships have started
    for _ in $(seq 300); do
        [ "$(wc -l < "$work/leaders")" -ge "$1" ] && return 0
        sleep 0.1
    done
    echo "no leader after 30s" >&2; exit 1
}

"$bin" dev-broker --listen "$brokers" 2> "$work/broker.log" &
broker=$!
sleep 0.5

say "three members join group 'demo' (session timeout 3s)"
for name in alpha beta gamma; do
    "$bin" -b "$brokers" -g demo --name "$name" --session-timeout 3s --heartbeat-deadline 1500ms \
        --heartbeat-interval 250ms --grace 1s -X heartbeat.interval.ms=300 -q -- \
        sh -c 'echo "$NELI_NAME $NELI_FENCING_TOKEN" >> "$0"; echo "  [$NELI_NAME] running the job (fencing token $NELI_FENCING_TOKEN)"; exec sleep 600' \
        "$work/leaders" &
    pids+=($!)
    eval "pid_$name=$!"
done
start=$(now_ms)
wait_for_leaders 1
echo "  elected $(leader) in $(took "$start")"

first=$(leader)
say "graceful handover: SIGTERM to $first"
eval "kill -TERM \$pid_$first"
start=$(now_ms)
wait_for_leaders 2
echo "  $(leader) took over in $(took "$start")"

second=$(leader)
say "crash failover: SIGKILL to $second's neli-run"
eval "kill -KILL \$pid_$second"
start=$(now_ms)
wait_for_leaders 3
echo "  $(leader) took over in $(took "$start") (session timeout 3s)"
echo "  job processes running now: $(pgrep -xc sleep -P "$(pgrep -d, -f neli-run-shim)" || echo 0) (the dead leader's died with it)"

say "fencing tokens, in order of leadership"
cat "$work/leaders"
