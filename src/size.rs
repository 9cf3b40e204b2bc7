//! Byte sizes as people write them (`64KiB`, `8k`, `1MiB`, `512`), for
//! `--keep-output` and a crontab job's `output=`.

/// The most output a run's record keeps. The record must stay below Kafka's
/// default `message.max.bytes` (1 MiB on a broker; 1,000,000 bytes in
/// librdkafka's producer) with its output escaped as JSON, which writes a
/// control byte as six (`\u001b`): 128 KiB of them is 768 KiB.
pub const MAX_OUTPUT: usize = 128 * 1024;

/// The default: the last 8 KiB (about a hundred lines) of a run's output.
pub const DEFAULT_OUTPUT: &str = "8KiB";

/// Parses a size of kept output: a number of bytes with an optional unit
/// (K, KB, KiB: 1024; M, MB, MiB: 1024 * 1024; any case), at most
/// `MAX_OUTPUT`. The error says what to write instead.
pub fn output(value: &str) -> Result<usize, String> {
    let text = value.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let unit = match text[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => 0,
    };
    let bytes = text[..digits].parse::<usize>().ok().filter(|_| unit > 0).and_then(|n| n.checked_mul(unit));
    match bytes {
        Some(n) if n <= MAX_OUTPUT => Ok(n),
        Some(_) => Err(format!(
            "{value} is more than a run's record holds: at most 128KiB (the record must stay below Kafka's default \
             message.max.bytes, 1 MiB, with its output escaped as JSON); give 128KiB or less"
        )),
        None => Err(format!("{value} is not a size: give bytes with an optional unit, e.g. 0, 512, 64KiB, 1MiB")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_written_and_too_big_names_the_most() {
        assert_eq!(output("0"), Ok(0));
        assert_eq!(output("512"), Ok(512));
        assert_eq!(output("64KiB"), Ok(65_536));
        assert_eq!(output("8k"), Ok(8192));
        assert_eq!(output(" 2 KB "), Ok(2048));
        assert_eq!(output("128KiB"), Ok(MAX_OUTPUT));
        assert_eq!(output(DEFAULT_OUTPUT), Ok(8192));
        assert!(output("1MiB").unwrap_err().contains("at most 128KiB"));
        assert!(output("129KiB").unwrap_err().contains("at most 128KiB"));
        for bad in ["", "KiB", "1.5KiB", "-1", "12 parsecs", "99999999999999999999"] {
            assert!(output(bad).unwrap_err().contains("is not a size"), "{bad}");
        }
    }
}
