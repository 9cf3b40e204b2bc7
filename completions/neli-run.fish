# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_neli_run_global_optspecs
    string join \n b/brokers= kafka-config= kafka-secret= g/group= topic= X= session-timeout= no-wake heartbeat-interval= heartbeat-deadline= grace= stop-signal= restart= roles= overlap restart-delay= once-within= failed-run= max-runtime= keep-output= every= cron= crontab= time-zone= missed= starting-deadline= name= priority= preempt hot-standbys= never-lead acquire-timeout= metrics-addr= leader-file= on-lead= on-unlead= on-exit= on-failure= hook-timeout= health-cmd= health-interval= health-timeout= health-retries= warm lead-signal= unlead-signal= v/verbose q/quiet log-format= h/help V/version
end

function __fish_neli_run_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_neli_run_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_neli_run_using_subcommand
    set -l cmd (__fish_neli_run_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c neli-run -n "__fish_neli_run_needs_command" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_needs_command" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l session-timeout -d 'How long a crashed leader blocks takeover (Kafka\'s session timeout): the one timing flag most users set' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l heartbeat-interval -d 'How often the leader writes a heartbeat record to partition 0 [default: --session-timeout / 12, at most 500ms]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l heartbeat-deadline -d 'Kill the command when no own heartbeat has come back for this long [default: --session-timeout - 700ms]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l grace -d 'Time between the stop signal and SIGKILL [default: --session-timeout / 2, at most 3s]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l stop-signal -d 'Signal that asks the command to stop (name or number)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l restart -d 'What to do when the command exits while leader [default: never; always with --roles above 1, unless on a schedule]' -r -f -a "never\t'Exit with the child\'s status (and leave the group)'
on-failure\t'Start it again unless it exited with status 0'
always\t'Start it again whatever its status'"
complete -c neli-run -n "__fish_neli_run_needs_command" -l roles -d 'NELI\'s roles: run the command once per role, each role on exactly one member of the group at a time [default: 1, the single leader]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l restart-delay -d 'Pause before restarting the command (--restart); a command that keeps failing waits longer' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l once-within -d 'With --restart never: members started within this long of a run\'s wave run the command once between them [default: 30s; 0 turns it off]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l failed-run -d 'With --restart never: what a wave does when its run fails (exits non-zero) [default: retry]' -r -f -a "retry\t'The next member runs it again, as after a crash [default]: each member runs it at most once, and a service fails over'
exit\t'Every member of the wave exits with the run\'s status'"
complete -c neli-run -n "__fish_neli_run_needs_command" -l max-runtime -d 'Stop a run that takes longer than this (stop signal, --grace, SIGKILL) [default: no limit]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l keep-output -d 'How much of each run\'s output goes on the record: the last SIZE bytes of its stdout and stderr together (as written, interleaved), in the run\'s end record on the runs topic, for `neli-run logs` to print from any host. At most 128KiB. 0 keeps none, and the command then writes to neli-run\'s stdout and stderr itself' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l every -d 'Run the command every DURATION while leader, and stay up between runs (e.g. 5m; at least 1s)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l cron -d 'Run the command at the times of a cron expression while leader, and stay up between runs, e.g. "30 2 * * *" (daily at 02:30)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l crontab -d 'Run a whole crontab, each job once per due time across the group, instead of one command: the same file on every host' -r -F
complete -c neli-run -n "__fish_neli_run_needs_command" -l time-zone -d 'The time zone of --cron: an IANA name such as Europe/Berlin, UTC, or local (the TZ variable, else /etc/localtime) [default: local]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l missed -d 'With --every or --cron: what happens to due times that passed with nobody to run them (nobody led, or the previous run still went on) [default: once]' -r -f -a "skip\t'Skip them (a run cut short by a crash too): wait for the next due time'
once\t'Run the latest of them once, at once [default]'
all\t'Run each of them, oldest first, one after another'"
complete -c neli-run -n "__fish_neli_run_needs_command" -l starting-deadline -d 'With --every or --cron: skip a due run that cannot start within this long of its due time [default: no limit]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l name -d 'This member\'s name in logs and heartbeats [default: <HOSTNAME>-<PID>]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l priority -d 'This member\'s priority, 0 to 100: when a leader stops, the live member of the highest priority leads [default: 0]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l hot-standbys -d 'How many standbys the group keeps ready to lead next, besides the members holding a role: the best by --priority, then by name' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l acquire-timeout -d 'Give up if not leader within this time [default: wait forever]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l metrics-addr -d 'Serve /metrics (Prometheus), /livez, /readyz and /leader on this address' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l leader-file -d 'A file that exists while this member leads: written (atomically) when it starts leading, removed when it stops and when neli-run exits. Lines of key=value: token, name, group, pid, since' -r -F
complete -c neli-run -n "__fish_neli_run_needs_command" -l on-lead -d 'Run CMD with /bin/sh -c when this member starts leading' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l on-unlead -d 'Run CMD with /bin/sh -c when this member stops leading; NELI_REASON says why: fenced, revoked, lost, yielded, unhealthy (--health-cmd) or exiting' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l on-exit -d 'Run CMD with /bin/sh -c after each run of the command ends; NELI_EXIT_STATUS is its status (128+N for signal N), NELI_REASON exited (by itself), stopped (by neli-run), overran (stopped past --max-runtime) or fenced' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l on-failure -d 'Run CMD with /bin/sh -c once for each run that fails, never for one that succeeds: a page, a ticket, a chat message' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l hook-timeout -d 'How long a hook may run before it and all it started are sent SIGKILL (at most 10m) [default: 10s]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l health-cmd -d 'Lead only while CMD, run with /bin/sh -c, exits 0: a member whose check fails --health-retries times in a row hands over, and stays out of the group until it passes again' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l health-interval -d 'How long after a check ends the next one starts [default: 5s]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l health-timeout -d 'How long a check may run before it and all it started are sent SIGKILL, and it counts as failed [default: 5s]' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l health-retries -d 'How many checks in a row must fail before this member is unhealthy [default: 3]; one that passes makes it healthy again' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l lead-signal -d 'With --warm: the signal that tells the command it leads (name or number)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l unlead-signal -d 'With --warm: the signal that tells the command it no longer leads (name or number)' -r
complete -c neli-run -n "__fish_neli_run_needs_command" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_needs_command" -l no-wake -d 'Neither wake the others when leaving nor rejoin on their wakes: a handover then waits for the standbys\' coordinator heartbeats (up to 0.8s at the defaults)'
complete -c neli-run -n "__fish_neli_run_needs_command" -l overlap -d 'NELI\'s non-exclusive mode: a revoke does not wait for the command, which gets --grace to finish while the next owner starts its own'
complete -c neli-run -n "__fish_neli_run_needs_command" -l preempt -d 'While leading, hand over to a member of higher --priority as soon as one is live (it joined, or came back)'
complete -c neli-run -n "__fish_neli_run_needs_command" -l never-lead -d 'Never lead: watch the group, log who leads, and be listed by `neli-run status`, without ever running COMMAND (which may be left out)'
complete -c neli-run -n "__fish_neli_run_needs_command" -l warm -d 'Run the command on every member, and only tell it when it leads: the leader\'s gets --lead-signal, with its fencing token in the file $NELI_TOKEN_FILE, and --unlead-signal (the file emptied first) when it stops leading'
complete -c neli-run -n "__fish_neli_run_needs_command" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_needs_command" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_needs_command" -s V -l version -d 'Print version'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "dev-broker" -d 'Run a Kafka-protocol broker in memory, to try neli-run without Kafka'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "status" -d 'Show who leads a group now, and its standbys, read from its records'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "history" -d 'Show the group\'s runs: who ran the command when, and how it ended, read from any host.'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "logs" -d 'Print a run\'s output, read from any host: the last run\'s, or the one that ran at --at.'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "console" -d 'Serve a web page of the group: its members, who holds each role, each job\'s next due time and last run, the recent runs with their output, and a timeline of leaderships and runs.'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "yield" -d 'Ask the leader to hand over to another member'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "pause" -d 'Pause the group for maintenance: no member starts the command until `neli-run resume`'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "resume" -d 'End a pause: the owner of partition 0 starts the command again'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "drain" -d 'Drain a member without stopping it: its commands stop, it leaves the group, and the others take what it ran, until `neli-run undrain`'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "undrain" -d 'End a drain: the member joins the group again and takes its share'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "cron" -d 'A fleet crontab: one file of jobs, each run once per due time across the group.'
complete -c neli-run -n "__fish_neli_run_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l listen -d 'Address to listen on and advertise to clients (broker 1\'s; broker i listens on PORT + i - 1)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l brokers -d 'Run a cluster of N brokers (1 to 9), on consecutive ports' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l control -d 'Take cluster events on a unix socket at PATH (mode 600), from `neli-run dev-broker event --control PATH EVENT`' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l advertise -d 'Address to advertise to clients, when it differs from --listen (e.g. listening on 0.0.0.0 for clients in other network namespaces)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l deny-topic -d 'Refuse access to TOPIC, as a broker with ACLs refuses a principal without permission (repeatable): to see what clients do then. A TOPIC ending in `*` refuses every topic it prefixes, existing or not, as a PREFIXED ACL (e.g. \'g.neli.wake-*\')' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l partitions -d 'Give every topic N partitions, whatever its creator asks for, as a topic created by hand with more than one: to see what members do then (a member joining may take partition 0 from a leader, which then stops its command). Without it, a topic gets what CreateTopics asks for, and one partition when a producer\'s Metadata request creates it' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l group-coordinator -d 'Who answers the group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and with `kafka` also OffsetCommit, OffsetFetch, DescribeGroups and ListGroups)' -r -f -a "kafka\t'Kafka\'s timing, answered by the dev broker itself'
mock\t'librdkafka\'s mock cluster'"
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l initial-rebalance-delay -d 'With --group-coordinator kafka: how long a group that starts from empty waits for more members before its first assignment (Kafka\'s group.initial.rebalance.delay.ms, 3s by default on a cluster)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l leave-pause -d 'With --group-coordinator kafka: how long a rebalance that a member\'s leave began holds every join before it completes with the members that joined meanwhile (tansu 0.6 pauses 3s; Kafka waits for its slowest member). For tests of what a slow rebalance does' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l sasl-user -d 'Require a SASL login as USER with PASSWORD (repeatable)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -f -a "event" -d 'Make one cluster event on the dev broker at --control, and say what it did.'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and not __fish_seen_subcommand_from event help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from event" -l control -d 'The dev broker\'s --control socket' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from event" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from event" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from event" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from event" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from help" -f -a "event" -d 'Make one cluster event on the dev broker at --control, and say what it did.'
complete -c neli-run -n "__fish_neli_run_using_subcommand dev-broker; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l json -d 'Print JSON instead of text'
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -l watch -d 'Keep watching; print a line each time the leader, its freshness, a pause or the standbys change (until Ctrl-C)'
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l role -d 'Only the runs of role J (--roles; the single leader is role 0)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l job -d 'Only the runs of the crontab job NAME' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l since -d 'Only the runs that started since then: a duration back from now (90m, 2d) or an RFC 3339 time (2026-11-29T08:00:00Z)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l limit -d 'Show the newest N runs (0: every run kept)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -l json -d 'Print one JSON object (the group, the topic, the runs; of a crontab job, its owner, pause and next due time too) instead of text'
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l role -d 'The run of role J (--roles; the single leader is role 0)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l job -d 'The run of the crontab job NAME' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l at -d 'The run that started last at or before this time (an RFC 3339 time, or a duration back from now: 2h). A time to the second, as `history` prints STARTED, counts the whole second. Without it, the last run' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s f -l follow -d 'Keep reading: print each run\'s output as the run ends, after a one-line header (until Ctrl-C)'
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -l raw -d 'Write the output\'s bytes as they are, control characters and all (for a file or a pipe; never a terminal you do not trust it on)'
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand logs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l listen -d 'Where to serve the page: HOST:PORT. Loopback by default, so that only this host (or an `ssh -L` tunnel) sees it; any other address needs a token' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l token-file -d 'A file holding the token every request must carry (one line). Kept off the command line; NELI_CONSOLE_TOKEN may hold the token itself' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand console" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l name -d 'Only if this member leads (its --name)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l to -d 'Hand over to this member (its --name): it must be live (`neli-run status` lists the standbys). Without it, the live member of the highest --priority leads, whichever Kafka picks among equals' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l role -d 'The role to move: 0, the single leader\'s. A group of roles (--roles) refuses it, naming what moves roles instead: Kafka\'s cooperative-sticky assignor would hand one role given back straight back to the same member' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l timeout -d 'How long to wait for another member to lead (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -l force -d 'Yield even when no member may take over (none live, or every one unhealthy or --never-lead, as `neli-run status` lists them): the command stops and nothing runs until a member leads, the same one after 3 session timeouts if it is alone. Without it such a yield is refused'
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand yield" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l role -d 'In a group of roles (--roles), pause role J only (its partition, 0 to roles - 1); without it, every role' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l timeout -d 'How long to wait for the owner of partition 0 (of each role paused) to acknowledge (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -l stop -d 'Also stop the command that runs now (stop signal, --grace, SIGKILL)'
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l role -d 'In a group of roles (--roles), resume role J only; without it, every role' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l timeout -d 'How long to wait for the owner of partition 0 (of each role resumed) to acknowledge (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l timeout -d 'How long to wait for the member to say it is drained (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -l force -d 'Drain it even when no other member may take over (none live, or every one unhealthy, drained or --never-lead): its commands stop and nothing runs them until another member joins'
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand drain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -l timeout -d 'How long to wait for the member to say it is back (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand undrain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "check" -d 'Read a crontab and say what each job means: its time, zone, next due times and command; refused lines as FILE:LINE:COLUMN on stderr'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "history" -d 'Show a job\'s runs: `neli-run history --job JOB`, the same reader and the same answer'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "pause" -d 'Pause one job: no member starts its runs until `cron resume JOB`'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "resume" -d 'End a job\'s pause: its owner runs it again from its next due time'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "trigger" -d 'Run a job now, once, across the fleet: its owner starts a run due now, recorded as any run'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and not __fish_seen_subcommand_from check history pause resume trigger help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -l time-zone -d 'The time zone of jobs with no CRON_TZ above them: an IANA name such as Europe/Berlin, UTC, or local [default: local]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -l next -d 'How many due times to show per job' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -l from -d 'Show the due times after this moment instead of now: an RFC 3339 time such as 2027-03-28T00:00:00+01:00 (to see what a daylight-saving day or a month\'s end does to a job)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -l json -d 'Print one JSON object (jobs and problems) instead of text'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l since -d 'Only the runs that started since then: a duration back from now (90m, 2d) or an RFC 3339 time (2026-11-29T08:00:00Z)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l limit -d 'Show the newest N runs (0: every run kept)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -l json -d 'Print one JSON object (the group, the topic, the runs; of a crontab job, its owner, pause and next due time too) instead of text'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l timeout -d 'How long to wait for the job\'s owner to acknowledge (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -l stop -d '`cron pause`: also stop the job\'s run under way'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l timeout -d 'How long to wait for the job\'s owner to acknowledge (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -l stop -d '`cron pause`: also stop the job\'s run under way'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s b -l brokers -d 'Kafka bootstrap brokers, comma-separated [default: the --kafka-config file\'s bootstrap.servers, or localhost:9092]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -l kafka-config -d 'A Java-style client properties file (the client.properties Kafka users already have): security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location ... Merged under -X' -r -F
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -l kafka-secret -d 'Set the Kafka property KEY to the contents of the file PATH, less one trailing newline (repeatable), e.g. sasl.password=PATH' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s g -l group -d 'The group: members of the same group elect one leader among them' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -l topic -d 'Topic for heartbeats [default: <GROUP>.neli]' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s X -d 'A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -l timeout -d 'How long to wait for the job\'s owner to start the run (at most 24h)' -r
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -l log-format -d 'Log format: text for people, json (one object per line) for collectors' -r -f -a "text\t''
json\t''"
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s v -l verbose -d 'More log output (-v debug, -vv trace); RUST_LOG overrides'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s q -l quiet -d 'Less log output (-q warnings and errors only, -qq errors only)'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from trigger" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "check" -d 'Read a crontab and say what each job means: its time, zone, next due times and command; refused lines as FILE:LINE:COLUMN on stderr'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "history" -d 'Show a job\'s runs: `neli-run history --job JOB`, the same reader and the same answer'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "pause" -d 'Pause one job: no member starts its runs until `cron resume JOB`'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "resume" -d 'End a job\'s pause: its owner runs it again from its next due time'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "trigger" -d 'Run a job now, once, across the fleet: its owner starts a run due now, recorded as any run'
complete -c neli-run -n "__fish_neli_run_using_subcommand cron; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "dev-broker" -d 'Run a Kafka-protocol broker in memory, to try neli-run without Kafka'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "status" -d 'Show who leads a group now, and its standbys, read from its records'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "history" -d 'Show the group\'s runs: who ran the command when, and how it ended, read from any host.'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "logs" -d 'Print a run\'s output, read from any host: the last run\'s, or the one that ran at --at.'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "console" -d 'Serve a web page of the group: its members, who holds each role, each job\'s next due time and last run, the recent runs with their output, and a timeline of leaderships and runs.'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "yield" -d 'Ask the leader to hand over to another member'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "pause" -d 'Pause the group for maintenance: no member starts the command until `neli-run resume`'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "resume" -d 'End a pause: the owner of partition 0 starts the command again'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "drain" -d 'Drain a member without stopping it: its commands stop, it leaves the group, and the others take what it ran, until `neli-run undrain`'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "undrain" -d 'End a drain: the member joins the group again and takes its share'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "cron" -d 'A fleet crontab: one file of jobs, each run once per due time across the group.'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and not __fish_seen_subcommand_from dev-broker status history logs console yield pause resume drain undrain cron help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from dev-broker" -f -a "event" -d 'Make one cluster event on the dev broker at --control, and say what it did.'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from cron" -f -a "check" -d 'Read a crontab and say what each job means: its time, zone, next due times and command; refused lines as FILE:LINE:COLUMN on stderr'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from cron" -f -a "history" -d 'Show a job\'s runs: `neli-run history --job JOB`, the same reader and the same answer'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from cron" -f -a "pause" -d 'Pause one job: no member starts its runs until `cron resume JOB`'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from cron" -f -a "resume" -d 'End a job\'s pause: its owner runs it again from its next due time'
complete -c neli-run -n "__fish_neli_run_using_subcommand help; and __fish_seen_subcommand_from cron" -f -a "trigger" -d 'Run a job now, once, across the fleet: its owner starts a run due now, recorded as any run'
