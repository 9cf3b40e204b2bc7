#!/usr/bin/env python3
"""kafka-python against a broker, with the client's default settings:
produce to a new topic, join a consumer group, consume what was produced,
commit, leave the group, and create a topic through the admin API. Fails (exit 1, saying which step) unless every
step works and the leave is answered without error: the client logs the
answer, and the group is empty right after (a member that did not leave
would stay in it for its session timeout).

Usage: kafka_python_check.py HOST:PORT
"""

import logging
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

NAME = "kafka-python"
COUNT = 3


def fail(step, detail):
    print(f"{NAME}: FAILED to {step}: {detail}", file=sys.stderr)
    sys.exit(1)


class Seen(logging.Handler):
    """What the client logs: its errors, and whether it left its group."""

    def __init__(self, group):
        super().__init__(logging.DEBUG)
        self.group = group
        self.errors = []
        self.left = False

    def emit(self, record):
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            self.errors.append(f"{record.name}: {message}")
        if message == f"LeaveGroup request for group {self.group} returned successfully":
            self.left = True


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    broker = sys.argv[1]
    run = uuid.uuid4().hex[:8]
    topic, group = f"kp-topic-{run}", f"kp-group-{run}"
    seen = Seen(group)
    logging.getLogger("kafka").addHandler(seen)
    logging.getLogger("kafka").setLevel(logging.INFO)
    import kafka

    print(f"{NAME} {kafka.__version__}: broker {broker}, topic {topic}, group {group}")

    step = "produce"
    try:
        producer = KafkaProducer(bootstrap_servers=broker)
        sent = [producer.send(topic, f"message {i}".encode()).get(timeout=30) for i in range(COUNT)]
        producer.close()
    except Exception as err:  # noqa: BLE001 (any error fails the step)
        fail(step, repr(err))
    if [m.offset for m in sent] != list(range(COUNT)):
        fail(step, f"offsets {[m.offset for m in sent]}, expected 0..{COUNT - 1}")
    print(f"{NAME}: produced {COUNT} messages to {topic} (offsets 0-{COUNT - 1})")

    step = "join the group and consume"
    partition = TopicPartition(topic, 0)
    try:
        # earliest: the messages were produced before the group existed.
        consumer = KafkaConsumer(topic, bootstrap_servers=broker, group_id=group, auto_offset_reset="earliest")
        got = []
        deadline = time.monotonic() + 30
        while len(got) < COUNT and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value.decode() for r in records)
        if got != [f"message {i}" for i in range(COUNT)]:
            fail(step, f"got {got} in 30 s")
        if consumer.assignment() != {partition}:
            fail(step, f"assignment {consumer.assignment()}, expected {{{partition}}}")
        print(f"{NAME}: joined {group}, assigned {topic}/0, consumed {COUNT} messages")

        step = "commit"
        consumer.commit()
        if consumer.committed(partition) != COUNT:
            fail(step, f"committed offset {consumer.committed(partition)}, expected {COUNT}")
        print(f"{NAME}: committed offset {COUNT}")

        step = "leave the group"
        consumer.close()
    except SystemExit:
        raise
    except Exception as err:  # noqa: BLE001
        fail(step, repr(err))
    if not seen.left:
        fail(step, "the client did not log that its LeaveGroup was answered without error")
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker)
        described = admin.describe_groups([group])[group]
        admin.close()
    except Exception as err:  # noqa: BLE001
        fail(step, f"describing the group: {err!r}")
    if described.get("error") or described["group_state"] != "Empty" or described["members"]:
        fail(step, f"right after the leave the group is {described}, expected Empty with no members")
    print(f"{NAME}: left {group}: the LeaveGroup was answered without error, and the group is Empty")

    step = "create a topic with the admin API"
    created = f"{topic}-created"
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker)
        admin.create_topics([NewTopic(created, num_partitions=3, replication_factor=1)])
        partitions = admin.describe_topics([created])[0]["partitions"]
        try:
            admin.create_topics([NewTopic(created, num_partitions=3, replication_factor=1)])
            fail(step, "creating it again was not refused")
        except TopicAlreadyExistsError:
            pass
        admin.close()
    except SystemExit:
        raise
    except Exception as err:  # noqa: BLE001
        fail(step, repr(err))
    if len(partitions) != 3:
        fail(step, f"{created} has {len(partitions)} partitions, expected 3")
    print(f"{NAME}: created {created} with 3 partitions; creating it again is refused (TOPIC_ALREADY_EXISTS)")

    if seen.errors:
        fail("run without client errors", "; ".join(seen.errors))
    print(f"{NAME}: ok")


if __name__ == "__main__":
    main()
