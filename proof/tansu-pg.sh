#!/bin/sh
# tansu over PostgreSQL: does a holder's command ride through a restart of
# its broker, or a rolling restart of three, at neli-run's defaults?
#
# A throwaway PostgreSQL cluster in a temp dir (run as the `postgres` user
# when we are root: postgres refuses root), tansu 0.6.0 built with its
# postgres storage (`cargo install tansu --version 0.6.0 --features
# postgres,dynostore`; the memory storage loses the log on a restart), and
# one holder: `neli-run -b BROKERS -g billing -- sleep 1000`, with a standby
# beside it (`--name standby`) so that the group has somewhere to move.
#
# usage: proof/tansu-pg.sh restart REPS      one broker, stopped and started again
#        proof/tansu-pg.sh rolling REPS      three brokers, each stopped and started in turn
# env:   PGSCHEMA (required for PostgreSQL: see below), TANSU (default: tansu on PATH), NELI (default: target/release/neli-run),
#        STORAGE (tansu's --storage-engine; default: the throwaway PostgreSQL), DOWN (seconds a broker stays down, default 1), SETTLE (seconds watched after, default 15)
#
# Prints, per rep, whether the holder's command was stopped (a `child
# exited` line of the holder), and the holder's WARN lines: where a stop
# came from (a fence at the heartbeat deadline, a revoke).
set -eu
mode=${1:?restart or rolling}
reps=${2:-5}
TANSU=${TANSU:-tansu}
NELI=${NELI:-$(pwd)/target/release/neli-run}
DOWN=${DOWN:-1}
SETTLE=${SETTLE:-15}
if [ -z "${STORAGE:-}" ] && [ ! -f "${PGSCHEMA:-}" ]; then
    echo "set PGSCHEMA to tansu's etc/initdb.d/010-schema.sql (its repository, at the tag of the tansu in use)" >&2
    exit 2
fi
work=$(mktemp -d /tmp/tansu-pg.XXXXXX)
chmod 755 "$work"
pgport=$((20000 + $$ % 20000))
as_pg() { if [ "$(id -u)" = 0 ]; then su -s /bin/sh postgres -c "$1"; else sh -c "$1"; fi; }
PGBIN=${PGBIN:-$(dirname "$(command -v initdb || echo /usr/lib/postgresql/15/bin/initdb)")}
mkdir -p "$work/pg"
[ "$(id -u)" = 0 ] && chown postgres "$work/pg"
as_pg "$PGBIN/initdb -D $work/pg/data -U postgres --auth=trust" > "$work/initdb.log" 2>&1
as_pg "$PGBIN/pg_ctl -D $work/pg/data -o '-p $pgport -k $work/pg -c listen_addresses=127.0.0.1' -l $work/pg/pg.log -w start" > /dev/null
storage=${STORAGE:-postgres://postgres:postgres@127.0.0.1:$pgport/postgres}
# tansu's schema: tansu 0.6.0 creates none in PostgreSQL, and its crate
# ships SQLite's DDL only; PGSCHEMA names the file to apply (tansu's
# repository, etc/initdb.d/010-schema.sql, at the tag of the tansu in use).
case $storage in postgres://*)
    psql -q -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -f "$PGSCHEMA" > /dev/null ;;
esac
n=1; [ "$mode" = rolling ] && n=3
base=$((pgport + 1))
brokers=""; i=0; while [ $i -lt $n ]; do brokers="$brokers${brokers:+,}127.0.0.1:$((base + i))"; i=$((i + 1)); done
pids=""
start_broker() { # index
    port=$((base + $1))
    "$TANSU" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        --storage-engine "$storage" >> "$work/tansu$1.log" 2>&1 &
    eval "tansu$1=$!"
    i=0; until bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
stop_broker() { eval "kill -TERM \$tansu$1; wait \$tansu$1 2>/dev/null || true"; }
holder=; standby=
cleanup() {
    set +e
    [ -n "$holder$standby" ] && kill -TERM $holder $standby 2>/dev/null; sleep 1
    i=0; while [ $i -lt $n ]; do stop_broker $i 2>/dev/null || true; i=$((i + 1)); done
    as_pg "$PGBIN/pg_ctl -D $work/pg/data -m fast stop" > /dev/null 2>&1 || true
    echo "logs: $work"
}
trap cleanup EXIT
i=0; while [ $i -lt $n ]; do start_broker $i; i=$((i + 1)); done
"$NELI" -b "$brokers" -g billing --name holder -- sleep 1000 2> "$work/holder.log" & holder=$!
i=0; until grep -q "child started" "$work/holder.log" || [ $i -gt 600 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "child started" "$work/holder.log" || { echo "the holder never led"; exit 1; }
"$NELI" -b "$brokers" -g billing --name standby -- sleep 1000 2> "$work/standby.log" & standby=$!
sleep 10
echo "tansu over PostgreSQL, $n broker(s), $mode x $reps, down ${DOWN}s each, watched ${SETTLE}s; work dir $work"
stopped=0
rep=1
while [ "$rep" -le "$reps" ]; do
    mark=$(wc -l < "$work/holder.log")
    i=0; while [ $i -lt $n ]; do
        stop_broker $i; sleep "$DOWN"; start_broker $i
        [ "$mode" = rolling ] && sleep 6
        i=$((i + 1))
    done
    sleep "$SETTLE"
    after=$(tail -n +"$((mark + 1))" "$work/holder.log")
    if printf '%s\n' "$after" | grep -q "child exited"; then
        verdict=STOPPED; stopped=$((stopped + 1))
    else
        verdict="rode through"
    fi
    echo "rep $rep: $verdict"
    printf '%s\n' "$after" | grep -v librdkafka | grep -E " WARN | ERROR |child exited|child started|revoked|fenc" |
        cut -c1-220 | sed 's/^/    /' | head -12
    rep=$((rep + 1))
done
echo "$mode: the command stopped in $stopped of $reps"
