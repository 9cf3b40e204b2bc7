//! A run's output on its end record: the tail its shim kept
//! (`child::output`), as text when it is UTF-8 (`output`, readable with
//! any Kafka tool), else as base64 (`output_base64`), with the count of
//! bytes the run wrote in all (`output_bytes`). The record stays below
//! `MAX_RECORD` whatever the output (`bound`).

use super::RunRecord;
use crate::child::output::Kept;

/// The most bytes a run's record may take: below librdkafka's default
/// `message.max.bytes` (1,000,000) and the broker's (1,048,588), with room
/// for the batch's own bytes.
pub const MAX_RECORD: usize = 990_000;

/// Puts `kept` on `record`, within `MAX_RECORD`.
pub fn set(record: &mut RunRecord, kept: &Kept) {
    let mut bytes = kept.bytes.as_slice();
    loop {
        encode(record, bytes);
        record.output_bytes = Some(kept.total);
        let size = serde_json::to_vec(record).map_or(usize::MAX, |json| json.len());
        if size <= MAX_RECORD || bytes.is_empty() {
            return;
        }
        // Escaped bytes take up to six times their room: keep fewer.
        bytes = &bytes[bytes.len().div_ceil(2)..];
    }
}

/// `bytes` as the record's text, or base64 when they are not UTF-8. A
/// tail that starts in a character's middle starts at its next one.
fn encode(record: &mut RunRecord, bytes: &[u8]) {
    let partial = bytes.iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count();
    (record.output, record.output_base64) = match std::str::from_utf8(&bytes[partial..]) {
        Ok(text) => (Some(text.to_string()), None),
        Err(_) => (None, Some(base64(bytes))),
    };
}

/// The output a record keeps, as bytes (None: none kept, or base64 that
/// does not decode).
pub fn bytes(record: &RunRecord) -> Option<Vec<u8>> {
    match (&record.output, &record.output_base64) {
        (Some(text), _) => Some(text.as_bytes().to_vec()),
        (None, Some(coded)) => unbase64(coded),
        (None, None) => None,
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 (RFC 4648, padded).
fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

fn unbase64(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u32> = text
        .trim_end_matches('=')
        .bytes()
        .map(|c| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32))
        .collect::<Option<_>>()?;
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &d)| n | d << (18 - 6 * i));
        out.extend(n.to_be_bytes()[1..].iter().take(chunk.len().saturating_sub(1)));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        let json = r#"{"v":1,"run":"t-1","event":"end","group":"g","topic":"g.neli","role":0,"member":"m","host":"h","pid":1,"token":1,"start_ms":1}"#;
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn base64_round_trips_every_length() {
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        let all: Vec<u8> = (0..=255).collect();
        for n in 0..all.len() {
            assert_eq!(unbase64(&base64(&all[..n])).as_deref(), Some(&all[..n]), "{n}");
        }
        assert_eq!(unbase64("Zm9v!"), None);
    }

    #[test]
    fn text_stays_text_and_binary_goes_base64_both_read_back() {
        let mut r = record();
        set(&mut r, &Kept { bytes: b"ok \x1b[2J\n".to_vec(), total: 900 });
        assert_eq!(
            (r.output.as_deref(), r.output_base64.as_deref(), r.output_bytes),
            (Some("ok \x1b[2J\n"), None, Some(900))
        );
        assert_eq!(bytes(&r).unwrap(), b"ok \x1b[2J\n");
        // Cut in a character's middle: it starts at the next one.
        set(&mut r, &Kept { bytes: "ü!".as_bytes()[1..].to_vec(), total: 3 });
        assert_eq!(r.output.as_deref(), Some("!"));
        set(&mut r, &Kept { bytes: vec![0xff, 0, 1], total: 3 });
        assert_eq!((r.output.as_deref(), r.output_base64.as_deref()), (None, Some("/wAB")));
        assert_eq!(bytes(&r).unwrap(), [0xff, 0, 1]);
    }

    #[test]
    fn the_worst_output_still_fits_a_record() {
        // The most kept, every byte escaped as six.
        let mut r = record();
        set(&mut r, &Kept { bytes: vec![1; crate::size::MAX_OUTPUT], total: 1 << 40 });
        let size = serde_json::to_vec(&r).unwrap().len();
        assert!(size <= MAX_RECORD && size > 700_000, "{size}");
        // Past it (a member name of a megabyte): what fits, down to none.
        r.member = "m".repeat(MAX_RECORD);
        set(&mut r, &Kept { bytes: vec![b'x'; 1000], total: 1000 });
        assert_eq!(r.output.as_deref(), Some(""));
    }
}
