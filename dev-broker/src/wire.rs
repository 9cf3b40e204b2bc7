//! The few pieces of Kafka's wire format the forwarder reads and writes.

/// The API keys of the requests the forwarder reads.
pub const PRODUCE: i16 = 0;
pub const FETCH: i16 = 1;
pub const METADATA: i16 = 3;
pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_FETCH: i16 = 9;
pub const FIND_COORDINATOR: i16 = 10;
pub const JOIN_GROUP: i16 = 11;
pub const HEARTBEAT: i16 = 12;
pub const LEAVE_GROUP: i16 = 13;
pub const SYNC_GROUP: i16 = 14;
pub const DESCRIBE_GROUPS: i16 = 15;
pub const LIST_GROUPS: i16 = 16;
pub const SASL_HANDSHAKE: i16 = 17;
pub const API_VERSIONS: i16 = 18;
pub const CREATE_TOPICS: i16 = 19;
pub const SASL_AUTHENTICATE: i16 = 36;

/// The highest ApiVersions version the mock serves (librdkafka 2.12.1,
/// rdkafka_mock_handlers.c: 0 to 2).
pub const API_VERSIONS_MAX: i16 = 2;
/// Kafka's error codes, those the dev broker answers with (Kafka's
/// `Errors.java`), in one place for every part of it.
pub const NONE: i16 = 0;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_TOPIC: i16 = 17;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REQUEST: i16 = 42;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const FENCED_INSTANCE_ID: i16 = 82;

/// Reads a frame front to back; every read is None past its end.
#[derive(Clone)]
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    pub fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }
    pub fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn uvarint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.take(1)?.first()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    pub fn tagged_fields(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.skip(size as usize)?;
        }
        Some(())
    }
    /// A string, compact when `flexible`; Some(None) when null.
    pub fn string_in(&mut self, flexible: bool) -> Option<Option<String>> {
        let len = if flexible { self.uvarint()? as i64 - 1 } else { i64::from(self.i16()?) };
        if len < 0 {
            return Some(None);
        }
        Some(Some(String::from_utf8_lossy(self.take(len as usize)?).into_owned()))
    }
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn string(&mut self) -> Option<String> {
        let len = self.i16()?;
        Some(String::from_utf8_lossy(self.take(len.max(0) as usize)?).into_owned())
    }
    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = self.i32()?;
        Some(self.take(len.max(0) as usize)?.to_vec())
    }
    /// What is left to read.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.at.min(self.buf.len())..]
    }
}

/// A request's header, and a reader at its body: read once per request,
/// then handed to whichever part serves its API.
#[derive(Clone)]
pub struct Header<'a> {
    pub api_key: i16,
    pub version: i16,
    pub correlation: i32,
    pub client_id: String,
    /// Whether the request uses compact strings and tagged fields.
    pub flexible: bool,
    pub body: Reader<'a>,
}

impl<'a> Header<'a> {
    pub fn parse(frame: &'a [u8]) -> Option<Header<'a>> {
        let mut r = Reader { buf: frame, at: 0 };
        let (api_key, version, correlation) = (r.i16()?, r.i16()?, r.i32()?);
        let client_id = r.string_in(false)?.unwrap_or_default(); // never compact
        let flexible = match api_key {
            FETCH => version >= 12,
            METADATA => version >= 9,
            JOIN_GROUP => version >= 6,
            OFFSET_COMMIT => version >= 8,
            OFFSET_FETCH => version >= 6,
            DESCRIBE_GROUPS => version >= 5,
            LIST_GROUPS => version >= 3,
            SYNC_GROUP => version >= 4,
            API_VERSIONS => version >= 3,
            CREATE_TOPICS => version >= 5,
            _ => false, // the others the forwarder reads (SASL) are not
        };
        if flexible {
            r.tagged_fields()?;
        }
        Some(Header { api_key, version, correlation, client_id, flexible, body: r })
    }
}

/// The answer to an ApiVersions request of a version above
/// [`API_VERSIONS_MAX`], as Kafka gives it (KIP-511): UNSUPPORTED_VERSION in
/// version 0's shape whatever version was asked (an i32 count, then key,
/// min and max of ApiVersions alone, and no throttle time), so that the
/// client reads it whatever it knows and retries with a version it can use.
/// None for any other request. Only the first 8 bytes are read: a version
/// not known here may lay out the rest of its header otherwise.
///
/// The mock's own answer is neither: it writes the array count of a
/// flexible version as one plain byte (1 for one API, which a compact array
/// reads as none) and the body as version 3's.
pub fn api_versions_fallback(frame: &[u8]) -> Option<Vec<u8>> {
    let mut r = Reader { buf: frame, at: 0 };
    let (api_key, version, correlation) = (r.i16()?, r.i16()?, r.i32()?);
    if api_key != API_VERSIONS || version <= API_VERSIONS_MAX {
        return None;
    }
    let mut out = correlation.to_be_bytes().to_vec();
    out.extend_from_slice(&UNSUPPORTED_VERSION.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    for v in [API_VERSIONS, 0, API_VERSIONS_MAX] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    Some(out)
}

/// Adds APIs (key, min, max) to an ApiVersions response frame of `version`
/// (without its length) for what the forwarder answers itself. None if the
/// frame is not one.
pub fn add_apis(frame: &[u8], version: i16, apis: &[(i16, i16, i16)]) -> Option<Vec<u8>> {
    let flexible = version >= 3;
    // correlation id, error code, then the array of APIs.
    let head = frame.get(..6)?;
    let mut r = Reader { buf: frame, at: 6 };
    let count = if flexible { r.uvarint()?.checked_sub(1)? } else { u64::try_from(r.i32()?).ok()? };
    let mut out = head.to_vec();
    if flexible {
        put_uvarint(&mut out, count + 1 + apis.len() as u64);
    } else {
        out.extend_from_slice(&(count as i32 + apis.len() as i32).to_be_bytes());
    }
    for (key, min, max) in apis {
        for v in [key, min, max] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if flexible {
            out.push(0); // tagged fields
        }
    }
    out.extend_from_slice(r.rest());
    Some(out)
}

/// A (nullable) classic string: i16 length, then the bytes.
pub fn put_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.extend_from_slice(&(s.len() as i16).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

/// Classic bytes: i32 length, then the bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

pub fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ApiVersions request of `version` (flexible from v3: header tagged
    /// fields, then the client's name and version as compact strings).
    fn api_versions(version: i16) -> Vec<u8> {
        let mut f = API_VERSIONS.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&9i32.to_be_bytes());
        put_string(&mut f, Some("kafka-python"));
        if version >= 3 {
            f.extend_from_slice(&[0, 3, b'k', b'p', 2, b'3', 0]);
        }
        f
    }

    #[test]
    fn an_api_versions_request_above_v2_is_answered_in_v0_shape_per_kip_511() {
        for version in [3, 4, 9] {
            let answer = api_versions_fallback(&api_versions(version)).expect("answered here");
            // correlation 9, UNSUPPORTED_VERSION, one API: ApiVersions 0 to 2.
            assert_eq!(answer, [0, 0, 0, 9, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 2], "v{version}");
            // Read as version 0, as every client reads an error answer.
            let mut r = Reader { buf: &answer, at: 4 };
            assert_eq!((r.i16(), r.i32(), r.i16(), r.i16(), r.i16()), (Some(35), Some(1), Some(18), Some(0), Some(2)));
            assert!(r.rest().is_empty(), "nothing after the array in v0");
        }
        // The versions served, other requests and garbage go on to the mock.
        for version in 0..=API_VERSIONS_MAX {
            assert_eq!(api_versions_fallback(&api_versions(version)), None, "v{version}");
        }
        let mut metadata = api_versions(4);
        metadata[1] = METADATA as u8;
        assert_eq!(api_versions_fallback(&metadata), None);
        assert_eq!(api_versions_fallback(&[0, 18, 0, 4, 0]), None);
    }
}
