//! Partitions added to a topic (CreatePartitions, as `kafka-topics.sh
//! --alter --partitions N` and admin clients send it), which the mock does
//! not serve and cannot do: its topics keep the partitions they were
//! created with.
//!
//! So the mock creates each topic with [`ROOM`] partitions (or more, if
//! asked), and clients see the ones the topic has: the forwarder's
//! [`crate::cluster::Cluster`] keeps each topic's count (its partitions'
//! leaders), Metadata answers list only those ([`trim`]), and a
//! CreatePartitions raises the count, up to `ROOM`. Nothing else changes: a
//! client names only partitions it was shown.

use super::topics::{edit_topics, put_count};
use super::wire::{put_string, Header, INVALID_PARTITIONS, INVALID_REQUEST, NONE, TOPIC_AUTHORIZATION_FAILED};

pub const CREATE_PARTITIONS: i16 = 37;

/// The CreatePartitions versions answered here: the non-flexible ones (0
/// and 1; librdkafka and kafka-python use them). The ApiVersions answer
/// gains them.
pub const CREATE_PARTITIONS_VERSIONS: (i16, i16, i16) = (CREATE_PARTITIONS, 0, 1);

/// How many partitions a topic can have on the dev broker: the mock's
/// topics are made this big, whatever clients see of them.
pub const ROOM: i32 = 64;

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// One topic of a CreatePartitions request: its name and the count asked.
#[derive(Debug, PartialEq)]
pub struct Growth {
    pub name: String,
    pub count: i32,
}

/// A CreatePartitions request (versions 0 and 1).
#[derive(Debug, PartialEq)]
pub struct CreatePartitions {
    pub correlation: i32,
    pub topics: Vec<Growth>,
    /// Check only, change nothing.
    pub validate_only: bool,
}

impl CreatePartitions {
    /// The request, or None for any other request, a version not answered
    /// here, or one that does not parse.
    pub fn parse(header: &Header) -> Option<CreatePartitions> {
        let Header { api_key, version, correlation, .. } = *header;
        let (_, low, high) = CREATE_PARTITIONS_VERSIONS;
        if api_key != CREATE_PARTITIONS || !(low..=high).contains(&version) {
            return None;
        }
        let mut r = header.body.clone();
        let mut topics = Vec::new();
        for _ in 0..r.i32()?.max(0) {
            let (name, count) = (r.string()?, r.i32()?);
            // The new partitions' replicas, given by hand (null: the broker's
            // choice): the dev broker's every partition is on every broker.
            for _ in 0..r.i32()?.max(0) {
                let brokers = r.i32()?.max(0) as usize;
                r.skip(4 * brokers)?;
            }
            topics.push(Growth { name, count });
        }
        r.skip(4)?; // timeout
        let validate_only = r.take(1)? != [0];
        Some(CreatePartitions { correlation, topics, validate_only })
    }

    /// Checks each topic as Kafka does, has `grow` raise the valid ones to
    /// their count (unless only validating), and returns the response frame.
    /// `count` says how many partitions a topic has (None: no such topic);
    /// `grow` answers with Kafka's error code and message.
    pub fn answer(
        &self,
        denied: impl Fn(&str) -> bool,
        count: impl Fn(&str) -> Option<i32>,
        mut grow: impl FnMut(&str, i32) -> Result<(), (i16, String)>,
    ) -> Vec<u8> {
        let mut out = self.correlation.to_be_bytes().to_vec();
        out.extend_from_slice(&0i32.to_be_bytes()); // throttle time
        put_count(&mut out, self.topics.len(), false);
        for (i, topic) in self.topics.iter().enumerate() {
            let Growth { name, count: asked } = topic;
            let checked = if self.topics[..i].iter().any(|t| t.name == *name) {
                Err((INVALID_REQUEST, format!("Duplicate topic in request: {name}")))
            } else if denied(name) {
                Err((TOPIC_AUTHORIZATION_FAILED, "Authorization failed.".to_string()))
            } else {
                match count(name) {
                    None => Err((UNKNOWN_TOPIC_OR_PARTITION, format!("The topic '{name}' does not exist."))),
                    Some(has) if *asked <= has => Err((
                        INVALID_PARTITIONS,
                        format!("Topic currently has {has} partitions, which is higher than the requested {asked}."),
                    )),
                    Some(_) if *asked > ROOM => Err((
                        INVALID_PARTITIONS,
                        format!("The dev broker gives a topic at most {ROOM} partitions; {asked} were asked for."),
                    )),
                    Some(_) if self.validate_only => Ok(()),
                    Some(_) => grow(name, *asked),
                }
            };
            put_string(&mut out, Some(name));
            let (code, message) = checked.map_or_else(|(c, m)| (c, Some(m)), |()| (NONE, None));
            out.extend_from_slice(&code.to_be_bytes());
            put_string(&mut out, message.as_deref());
        }
        out
    }
}

/// A Metadata response frame of `version` (without its length) whose
/// topics list only the partitions they have (`count`; None: the topic's
/// every partition the mock lists), or None if none had more listed, or the
/// frame does not parse.
pub fn trim(frame: &[u8], version: i16, count: impl Fn(&str) -> Option<i32>) -> Option<Vec<u8>> {
    edit_topics(frame, version, |topic| {
        let has = count(topic.name.as_deref()?)?;
        let shown: Vec<&[u8]> = topic.partitions.iter().filter(|(p, _)| *p < has).map(|(_, b)| *b).collect();
        if shown.len() == topic.partitions.len() {
            return None;
        }
        let mut out = topic.head.to_vec();
        put_count(&mut out, shown.len(), version >= 9);
        shown.iter().for_each(|b| out.extend_from_slice(b));
        out.extend_from_slice(topic.tail);
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::super::topics::tests::{header, metadata_response_with};
    use super::super::wire::{Reader, CREATE_TOPICS};
    use super::*;

    /// A CreatePartitions request: (name, count, replicas given by hand).
    fn create_partitions(version: i16, topics: &[(&str, i32, bool)], validate_only: bool) -> Vec<u8> {
        let mut f = header(CREATE_PARTITIONS, version);
        f.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for &(name, count, by_hand) in topics {
            put_string(&mut f, Some(name));
            f.extend_from_slice(&count.to_be_bytes());
            match by_hand {
                true => [1i32, 1, 1].iter().for_each(|n| f.extend_from_slice(&n.to_be_bytes())), // one partition, on broker 1
                false => f.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        f.extend_from_slice(&10_000i32.to_be_bytes());
        f.push(validate_only as u8);
        f
    }

    fn parse(frame: &[u8]) -> Option<CreatePartitions> {
        CreatePartitions::parse(&Header::parse(frame)?)
    }

    /// The response's topics: (name, error code, message).
    fn read_answer(frame: &[u8]) -> Vec<(String, i16, Option<String>)> {
        let mut r = Reader { buf: frame, at: 0 };
        assert_eq!(r.i32(), Some(7), "the request's correlation id");
        assert_eq!(r.i32(), Some(0), "throttle time");
        let topics = (0..r.i32().unwrap())
            .map(|_| (r.string().unwrap(), r.i16().unwrap(), r.string_in(false).unwrap()))
            .collect();
        assert!(r.rest().is_empty(), "nothing after the topics");
        topics
    }

    #[test]
    fn create_partitions_reads_versions_0_and_1_and_nothing_else() {
        for version in 0..=1 {
            let req = parse(&create_partitions(version, &[("g.neli", 3, false), ("h", 2, true)], true)).expect("read");
            assert_eq!((req.correlation, req.validate_only), (7, true));
            assert_eq!(req.topics, [Growth { name: "g.neli".into(), count: 3 }, Growth { name: "h".into(), count: 2 }]);
        }
        assert_eq!(parse(&create_partitions(2, &[("g", 2, false)], false)), None, "flexible v2");
        assert_eq!(parse(&header(CREATE_TOPICS, 1)), None);
        let frame = create_partitions(1, &[("g", 2, false)], false);
        assert_eq!(parse(&frame[..frame.len() - 3]), None, "a cut frame");
    }

    #[test]
    fn create_partitions_grows_the_valid_topics_and_answers_each_as_kafka_does() {
        let topics = [
            ("g.neli", 3, false),
            ("one", 1, false),
            ("nope", 2, false),
            ("secret", 2, false),
            ("big", 65, false),
            ("g.neli", 4, false),
        ];
        let req = parse(&create_partitions(1, &topics, false)).expect("read");
        let count = |t: &str| ["g.neli", "one", "secret", "big"].contains(&t).then_some(1);
        let mut grown = Vec::new();
        let answer = req.answer(
            |t| t == "secret",
            count,
            |t, n| {
                grown.push((t.to_string(), n));
                Ok(())
            },
        );
        assert_eq!(grown, [("g.neli".to_string(), 3)], "only the valid topic grows");
        let codes: Vec<(String, i16)> = read_answer(&answer).into_iter().map(|(n, c, _)| (n, c)).collect();
        let want = [
            ("g.neli", NONE),
            ("one", INVALID_PARTITIONS),
            ("nope", UNKNOWN_TOPIC_OR_PARTITION),
            ("secret", TOPIC_AUTHORIZATION_FAILED),
            ("big", INVALID_PARTITIONS),
            ("g.neli", INVALID_REQUEST),
        ];
        assert_eq!(codes, want.map(|(n, c)| (n.to_string(), c)));
        let (_, _, message) = &read_answer(&answer)[1];
        assert_eq!(message.as_deref(), Some("Topic currently has 1 partitions, which is higher than the requested 1."));
        // Only checked: nothing grows, and the valid topic is answered NONE.
        let req = parse(&create_partitions(0, &topics[..1], true)).expect("read");
        let answer = req.answer(|_| false, count, |_, _| panic!("validate_only grows nothing"));
        assert_eq!(read_answer(&answer), [("g.neli".to_string(), NONE, None)]);
    }

    #[test]
    fn metadata_answers_show_only_the_partitions_a_topic_has() {
        for version in 1..=12 {
            let mock =
                metadata_response_with(version, &[("g.neli", NONE, ROOM), ("other", NONE, 4), ("new", NONE, ROOM)]);
            let count = |t: &str| match t {
                "g.neli" => Some(2),
                "new" => Some(ROOM),
                _ => None,
            };
            let want = metadata_response_with(version, &[("g.neli", NONE, 2), ("other", NONE, 4), ("new", NONE, ROOM)]);
            assert_eq!(trim(&mock, version, count), Some(want), "v{version}");
            let shown = metadata_response_with(version, &[("g.neli", NONE, 2)]);
            assert_eq!(trim(&shown, version, count), None, "v{version}: nothing hidden");
            assert_eq!(trim(&mock[..mock.len() - 9], version, count), None, "v{version}: a cut frame");
        }
    }
}
