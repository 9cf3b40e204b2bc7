#!/usr/bin/env bash
# From a clean clone to neli-run at work, narrated: installs what the build
# lacks (scripts/build-deps: apt-get or dnf, with sudo unless root), builds
# the release binary, then runs three members of group 'demo' on the embedded
# dev broker (no Kafka needed): they elect one leader, the leader stops
# gracefully (a standby takes over at once), the next leader is killed with
# SIGKILL (its command dies with it, and a standby takes over within the
# session timeout), and `neli-run status` shows each leader. Nothing is left
# running or on disk afterwards.
#
# usage: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "build dependencies (scripts/build-deps)"
scripts/build-deps
echo "  all there"
# The first build downloads and compiles about 300 crates (librdkafka's C
# sources among them): 5 to 18 minutes on a fresh 2-core machine; with a
# build there already, seconds. Say which, and show it moving: cargo's own
# bar on a terminal, else a line every 25 crates.
if [ -x target/release/neli-run ]; then
    estimate="a build is there already: seconds, a minute or two if the sources changed"
else
    estimate="the first build: 5 to 18 minutes on 2 cores, downloads included; this machine has $(nproc 2>/dev/null || echo '?')"
fi
say "building neli-run (cargo build --release; $estimate)"
if [ -t 2 ]; then
    cargo build --release --bin neli-run
else
    build_log=$(mktemp)
    SECONDS=0
    n=0
    while IFS= read -r line; do
        printf '%s\n' "$line" >>"$build_log"
        case $line in
        *Compiling\ * | *Downloaded\ *)
            n=$((n + 1))
            [ $((n % 25)) -ne 0 ] || echo "  $n crates downloaded or compiled, ${SECONDS}s in"
            ;;
        esac
    done < <(if cargo build --release --bin neli-run 2>&1; then echo "cargo exit: 0"; else echo "cargo exit: $?"; fi)
    if ! tail -n 1 "$build_log" | grep -qx 'cargo exit: 0'; then
        tail -n 30 "$build_log" >&2
        rm -f "$build_log"
        echo "demo: the build failed (above); scripts/build-deps says what a build needs" >&2
        exit 1
    fi
    rm -f "$build_log"
    echo "  done in ${SECONDS}s"
fi
echo "  built: target/release/neli-run"
bin=$PWD/target/release/neli-run

work=$(mktemp -d)
pids=()
broker=
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    [ -z "$broker" ] || kill "$broker" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "demo: $*" >&2
    for log in "$work"/*.log; do
        echo "--- $log" >&2
        tail -n 20 "$log" >&2
    done
    exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
took() { local d=$(($(now_ms) - $1)); printf '%d.%02ds' $((d / 1000)) $((d % 1000 / 10)); }
# Each leadership appends "NAME TOKEN PID" to $work/leaders (the command does).
leader() { tail -n 1 "$work/leaders" | cut -d' ' -f1; }
wait_for_leaders() { # N: wait until N leaderships have started
    for _ in $(seq 300); do
        [ "$(wc -l <"$work/leaders")" -ge "$1" ] && return 0
        sleep 0.1
    done
    fail "no new leader within 30s"
}
# neli-run status, once it names the newest leader (its first heartbeat
# with its token follows the command's start).
status() {
    local out
    for _ in $(seq 100); do
        out=$("$bin" status -b "$brokers" -g demo 2>&1) && grep -q "leader $(leader) " <<<"$out" && break
        sleep 0.1
    done
    sed 's/^/  | /' <<<"$out"
}

# A free port: the broker exits if it cannot listen, and then we try another.
for _ in 1 2 3 4 5; do
    brokers=127.0.0.1:$((20000 + RANDOM % 20000))
    "$bin" dev-broker --listen "$brokers" 2>"$work/broker.log" &
    broker=$!
    for _ in $(seq 50); do
        (exec 3<>"/dev/tcp/${brokers%:*}/${brokers#*:}") 2>/dev/null && break
        sleep 0.1
    done
    kill -0 "$broker" 2>/dev/null && break
    broker=
done
[ -n "$broker" ] || fail "the dev broker did not start"
touch "$work/leaders"

say "three members join group 'demo' on the dev broker at $brokers"
echo "  each runs: neli-run -b $brokers -g demo --name NAME --session-timeout 3s -- sh -c '...; exec sleep 600'"
echo "  (--session-timeout alone sets the timing: the heartbeat deadline, interval and grace follow from it)"
for name in alpha beta gamma; do
    "$bin" -b "$brokers" -g demo --name "$name" --session-timeout 3s -q -- \
        sh -c 'echo "$NELI_NAME $NELI_FENCING_TOKEN $$" >> "$0"
               echo "  [$NELI_NAME] running the command (fencing token $NELI_FENCING_TOKEN)"
               exec sleep 600' "$work/leaders" 2>"$work/$name.log" &
    pids+=($!)
    eval "pid_$name=$!"
done
start=$(now_ms)
wait_for_leaders 1
echo "  elected $(leader) in $(took "$start"); the other two wait as hot standbys"
status

first=$(leader)
say "graceful handover: SIGTERM to $first's neli-run (as systemctl stop or docker stop do)"
eval "kill -TERM \$pid_$first"
start=$(now_ms)
wait_for_leaders 2
echo "  $(leader) took over $(took "$start") after the signal, once $first's command had stopped"
status

second=$(leader)
job=$(tail -n 1 "$work/leaders" | cut -d' ' -f3)
say "crash failover: SIGKILL to $second's neli-run (a host lost, the OOM killer)"
start=$(now_ms)
# (reaped at once, so that bash does not print "Killed")
eval "{ kill -KILL \$pid_$second; wait \$pid_$second; } 2>/dev/null || true"
wait_for_leaders 3
echo "  $(leader) took over in $(took "$start") (the session timeout is 3s: Kafka notices a crash only then)"
if kill -0 "$job" 2>/dev/null; then
    fail "$second's command (pid $job) still runs"
fi
echo "  $second's command (pid $job) died with it: neli-run's shim kills it when neli-run goes"
status

say "fencing tokens, in order of leadership (pass NELI_FENCING_TOKEN downstream to refuse a deposed leader)"
cut -d' ' -f1,2 "$work/leaders" | sed 's/^/  /'
echo
echo "Next: 'cargo test' runs the tests; README.md shows systemd, containers and cron."
