//! Java's `.properties` format, read exactly as `java.util.Properties.load`
//! does (its `LineReader` and `loadConvert`), because `--kafka-config` takes
//! the `client.properties` files Java clients already read:
//!
//! - lines end at `\n`, `\r` or `\r\n`; leading spaces, tabs and form feeds
//!   of every line are skipped; blank lines are skipped;
//! - a line whose first other character is `#` or `!` is a comment (a
//!   comment never continues onto the next line);
//! - a line ending in an odd number of backslashes continues on the next
//!   one (that backslash and the next line's leading whitespace dropped); an
//!   even number is that many / 2 literal backslashes;
//! - the key ends at the first unescaped `=`, `:`, space, tab or form feed;
//!   whitespace around it, and one `=` or `:` after whitespace, is skipped;
//! - the value is the rest of the line, trailing whitespace included;
//! - in keys and values `\t`, `\n`, `\r`, `\f` and `\uXXXX` are decoded and
//!   any other escaped character stands for itself (`\=`, `\:`, `\ `,
//!   `\#`, `\\`); a malformed `\uXXXX` is an error, as in Java.

use super::err;
use super::properties::{checked_property, Origin};
use crate::exit::Failure;

/// One `key=value` of the file.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    /// The line (from 1) where the entry starts.
    pub line: usize,
    pub key: String,
    pub value: String,
}

/// Why the file cannot be read; never carries a value.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed {
    pub line: usize,
    /// The key, when the error is in its value.
    pub key: Option<String>,
    pub reason: &'static str,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// The logical lines of `text` with the line each starts on (Java's
/// `LineReader.readLine`).
fn logical_lines(text: &str) -> Vec<(usize, Vec<char>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_no = 1;
    // Consumes the line end `c` (already read at i - 1) and counts it.
    let end_line = |i: usize, line_no: &mut usize, c: char| {
        // Of "\r\n", the '\n' that follows is the line end that counts.
        if !(c == '\r' && chars.get(i) == Some(&'\n')) {
            *line_no += 1;
        }
    };
    loop {
        let mut buf: Vec<char> = Vec::new();
        let mut start = line_no;
        let mut skip_blank = true;
        let mut appended = false;
        let mut backslash = false;
        loop {
            let Some(&c) = chars.get(i) else {
                if !buf.is_empty() {
                    if backslash {
                        buf.pop();
                    }
                    out.push((start, buf));
                }
                return out;
            };
            i += 1;
            if skip_blank {
                if is_blank(c) {
                    continue;
                }
                if !appended && (c == '\r' || c == '\n') {
                    end_line(i, &mut line_no, c);
                    continue;
                }
                skip_blank = false;
                appended = false;
            }
            if buf.is_empty() && (c == '#' || c == '!') {
                // A comment: up to the end of this line only.
                while let Some(&d) = chars.get(i) {
                    i += 1;
                    if d == '\n' || d == '\r' {
                        end_line(i, &mut line_no, d);
                        break;
                    }
                }
                skip_blank = true;
                continue;
            }
            if c != '\n' && c != '\r' {
                if buf.is_empty() {
                    start = line_no;
                }
                buf.push(c);
                backslash = c == '\\' && !backslash;
                continue;
            }
            end_line(i, &mut line_no, c);
            if buf.is_empty() {
                skip_blank = true;
                continue;
            }
            if backslash {
                buf.pop();
                skip_blank = true;
                appended = true;
                backslash = false;
                if c == '\r' && chars.get(i) == Some(&'\n') {
                    i += 1;
                    line_no += 1;
                }
                continue;
            }
            out.push((start, buf));
            break;
        }
    }
}

/// Java's `loadConvert`: decodes the escapes of a key or a value.
fn unescape(chars: &[char]) -> Result<String, &'static str> {
    let mut units: Vec<u16> = Vec::with_capacity(chars.len());
    let mut it = chars.iter().copied();
    while let Some(c) = it.next() {
        let c = if c == '\\' {
            match it.next() {
                // A backslash ending the last line of the file: Java drops it.
                None => break,
                Some('u') => {
                    let mut value: u16 = 0;
                    for _ in 0..4 {
                        let digit = it.next().and_then(|d| d.to_digit(16)).ok_or("malformed \\uXXXX escape")?;
                        value = (value << 4) | digit as u16;
                    }
                    units.push(value);
                    continue;
                }
                Some('t') => '\t',
                Some('n') => '\n',
                Some('r') => '\r',
                Some('f') => '\x0c',
                Some(other) => other,
            }
        } else {
            c
        };
        let mut buf = [0u16; 2];
        units.extend_from_slice(c.encode_utf16(&mut buf));
    }
    String::from_utf16(&units).map_err(|_| "a \\uXXXX escape is half of a UTF-16 surrogate pair")
}

/// Reads `text` as `Properties.load` does; later duplicates are kept (the
/// caller lets the last one win, as Java's table does).
pub fn parse(text: &str) -> Result<Vec<Entry>, Malformed> {
    let mut out = Vec::new();
    for (line, chars) in logical_lines(text) {
        let limit = chars.len();
        let mut key_len = 0;
        let mut value_start = limit;
        let mut has_sep = false;
        let mut backslash = false;
        while key_len < limit {
            let c = chars[key_len];
            if (c == '=' || c == ':') && !backslash {
                value_start = key_len + 1;
                has_sep = true;
                break;
            }
            if is_blank(c) && !backslash {
                value_start = key_len + 1;
                break;
            }
            backslash = c == '\\' && !backslash;
            key_len += 1;
        }
        while value_start < limit {
            let c = chars[value_start];
            if !is_blank(c) {
                if !has_sep && (c == '=' || c == ':') {
                    has_sep = true;
                } else {
                    break;
                }
            }
            value_start += 1;
        }
        let key = unescape(&chars[..key_len]).map_err(|reason| Malformed { line, key: None, reason })?;
        let value =
            unescape(&chars[value_start..]).map_err(|reason| Malformed { line, key: Some(key.clone()), reason })?;
        out.push(Entry { line, key, value });
    }
    Ok(out)
}

/// The username and password of a `sasl.jaas.config` value, read as Kafka's
/// JaasConfig does (a `java.io.StreamTokenizer`): `LoginModule flag
/// name=value ...;` where a value is a word or a quoted string with
/// backslash escapes; `//` and `/* */` comments.
pub(super) fn jaas_credentials(value: &str) -> Option<(String, String)> {
    let chars: Vec<char> = value.chars().collect();
    let mut i = 0;
    let mut tokens: Vec<(bool, String)> = Vec::new(); // (quoted, text)
    let word = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '$' | '.');
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            let quote = c;
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != quote {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                    let e = chars[i];
                    if ('0'..='7').contains(&e) {
                        let mut n = 0u32;
                        let mut digits = 0;
                        while digits < 3 && i < chars.len() && ('0'..='7').contains(&chars[i]) && n * 8 < 256 {
                            n = n * 8 + chars[i].to_digit(8)?;
                            i += 1;
                            digits += 1;
                        }
                        text.push(char::from_u32(n)?);
                        continue;
                    }
                    text.push(match e {
                        'a' => '\x07',
                        'b' => '\x08',
                        'f' => '\x0c',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'v' => '\x0b',
                        other => other,
                    });
                } else {
                    text.push(chars[i]);
                }
                i += 1;
            }
            i += 1;
            tokens.push((true, text));
        } else if word(c) {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            tokens.push((false, chars[start..i].iter().collect()));
        } else {
            tokens.push((false, c.to_string()));
            i += 1;
        }
    }
    // Skip the login module and its flag, then read name=value pairs.
    let (mut user, mut password) = (None, None);
    let mut t = tokens.iter().skip(2).peekable();
    while let Some((quoted, name)) = t.next() {
        if *quoted || !matches!(t.peek(), Some((false, eq)) if eq == "=") {
            continue;
        }
        t.next();
        let Some((_, value)) = t.next() else { break };
        match name.as_str() {
            "username" => user = Some(value.clone()),
            "password" => password = Some(value.clone()),
            _ => {}
        }
    }
    Some((user?, password?))
}

/// Maps a Java client property to librdkafka's, where they differ.
pub(super) fn translate_java_property(
    key: &str,
    value: String,
    origin: &Origin,
) -> Result<Vec<(String, String)>, Failure> {
    match key {
        // Java's way to give SASL credentials.
        "sasl.jaas.config" => match jaas_credentials(&value) {
            Some((user, password)) => Ok(vec![("sasl.username".into(), user), ("sasl.password".into(), password)]),
            None => err(format!(
                "{origin}: sasl.jaas.config has no username=\"...\" password=\"...\"; for Kerberos or OAuth set \
                 librdkafka's sasl.* properties instead"
            )),
        },
        "ssl.truststore.location" | "ssl.truststore.password" | "ssl.truststore.type" => err(format!(
            "{origin}: {key} (a Java truststore) is not supported by librdkafka; export the CA certificate as PEM \
             (keytool -exportcert -rfc) and set ssl.ca.location"
        )),
        // Java-only settings that have no meaning here.
        k if k.ends_with(".serializer") || k.ends_with(".deserializer") || k.ends_with(".class") => Ok(vec![]),
        _ => Ok(vec![checked_property(key, value, origin)?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap().into_iter().map(|e| (e.key, e.value)).collect()
    }

    fn one(text: &str) -> (String, String) {
        let mut all = pairs(text);
        assert_eq!(all.len(), 1, "{all:?}");
        all.remove(0)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    #[test]
    fn separators_equals_colon_and_whitespace() {
        assert_eq!(one("a=b"), kv("a", "b"));
        assert_eq!(one("a:b"), kv("a", "b"));
        assert_eq!(one("a b"), kv("a", "b"));
        assert_eq!(one("a\tb"), kv("a", "b"));
        assert_eq!(one("  a  =  b"), kv("a", "b"));
        assert_eq!(one("a : b"), kv("a", "b"));
        // Only one separator is skipped after whitespace.
        assert_eq!(one("a = = b"), kv("a", "= b"));
        assert_eq!(one("a==b"), kv("a", "=b"));
        assert_eq!(one("a"), kv("a", ""));
        assert_eq!(one("a="), kv("a", ""));
    }

    #[test]
    fn trailing_whitespace_is_part_of_the_value() {
        assert_eq!(one("sasl.password=secret   "), kv("sasl.password", "secret   "));
        assert_eq!(one("k=v\t\n"), kv("k", "v\t"));
    }

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(one("k=a\\tb"), kv("k", "a\tb"));
        assert_eq!(one("k=\\n\\r\\f"), kv("k", "\n\r\x0c"));
        assert_eq!(one("k=\\u00e9\\u20AC"), kv("k", "é€"));
        assert_eq!(one("k=\\uD83D\\uDE00"), kv("k", "😀"));
        assert_eq!(one("k=\\#not a comment"), kv("k", "#not a comment"));
        assert_eq!(one("k=\\!x\\;y\\\\z"), kv("k", "!x;y\\z"));
        assert_eq!(one("k=a\\b"), kv("k", "ab"));
        assert_eq!(one("k=\\u0000"), kv("k", "\0"));
    }

    #[test]
    fn malformed_unicode_escapes_are_errors() {
        let e = parse("\n\nsasl.password=ab\\u12").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (3, Some("sasl.password")));
        assert!(parse("k=\\uZZZZ").is_err());
        let e = parse("k\\u00=v").unwrap_err();
        assert_eq!(e.key, None);
        assert!(parse("k=\\uD83D").is_err(), "lone surrogate");
    }

    #[test]
    fn escaped_separators_belong_to_the_key() {
        assert_eq!(one("my\\ key=v"), kv("my key", "v"));
        assert_eq!(one("a\\=b=c"), kv("a=b", "c"));
        assert_eq!(one("a\\:b:c"), kv("a:b", "c"));
        assert_eq!(one("a\\\\=b"), kv("a\\", "b"));
    }

    #[test]
    fn comments_with_hash_and_bang_only_at_line_start() {
        assert_eq!(pairs("# c\n! c\n   # indented\nk=v # not a comment"), vec![kv("k", "v # not a comment")]);
        // A comment ending in a backslash does not continue.
        assert_eq!(pairs("# c \\\nk=v"), vec![kv("k", "v")]);
    }

    #[test]
    fn continuation_lines() {
        assert_eq!(one("k=a,\\\n    b,\\\n\tc"), kv("k", "a,b,c"));
        assert_eq!(one("k=a\\\r\n  b"), kv("k", "ab"));
        assert_eq!(one("k=a\\\r  b"), kv("k", "ab"));
        // A continuation line starting with '#' is not a comment.
        assert_eq!(one("k=a\\\n#b"), kv("k", "a#b"));
        // An empty line after a continuation ends the entry.
        assert_eq!(pairs("k=a\\\n\nj=b"), vec![kv("k", "a"), kv("j", "b")]);
        // A backslash at the very end of the file is dropped.
        assert_eq!(one("k=a\\"), kv("k", "a"));
    }

    #[test]
    fn odd_and_even_backslashes_at_the_line_end() {
        assert_eq!(pairs("k=a\\\\\nj=b"), vec![kv("k", "a\\"), kv("j", "b")]);
        assert_eq!(one("k=a\\\\\\\nb"), kv("k", "a\\b"));
        assert_eq!(pairs("k=a\\\\\\\\\nj=b"), vec![kv("k", "a\\\\"), kv("j", "b")]);
    }

    #[test]
    fn line_numbers_count_every_line_ending() {
        let e = parse("# one\r\n\r\na=1\\\n  2\rb=2\nc=3").unwrap();
        let lines: Vec<(usize, &str)> = e.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(lines, vec![(3, "a"), (5, "b"), (6, "c")]);
        assert_eq!(e[0].value, "12");
    }

    #[test]
    fn java_properties_files_are_read_and_translated() {
        let text = "# client.properties\n! also a comment\nbootstrap.servers=k1:9092,\\\n  k2:9092\n\
                    security.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n\
                    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=\"alice\" password=\"s3cret\";\nkey.serializer=org.apache.StringSerializer\n";
        let props: Vec<(String, String)> = parse(text).unwrap().into_iter().map(|e| (e.key, e.value)).collect();
        assert_eq!(props[0], ("bootstrap.servers".into(), "k1:9092,k2:9092".into()));
        assert_eq!(props[1], ("security.protocol".into(), "SASL_SSL".into()));
        assert_eq!(props[2], ("sasl.mechanism".into(), "SCRAM-SHA-512".into()));
        let at = Origin::File { path: "client.properties".into(), line: 7 };
        let jaas = translate_java_property(&props[3].0, props[3].1.clone(), &at).unwrap();
        assert_eq!(jaas, vec![("sasl.username".into(), "alice".into()), ("sasl.password".into(), "s3cret".into())]);
        assert_eq!(translate_java_property(&props[4].0, props[4].1.clone(), &at).unwrap(), vec![]);
        let e = translate_java_property("ssl.truststore.location", "x.jks".into(), &at).unwrap_err();
        assert!(e.message.contains("ssl.ca.location") && e.message.contains("client.properties line 7"), "{e}");
        let e = translate_java_property("group.id", "x".into(), &at).unwrap_err();
        assert!(e.message.contains("--group") && e.message.contains("line 7"), "{e}");
    }

    #[test]
    fn jaas_values_are_read_as_kafka_tokenizes_them() {
        let creds = jaas_credentials;
        let m = "org.apache.kafka.common.security.plain.PlainLoginModule required";
        assert_eq!(
            creds(&format!("{m} username=\"alice\" password=\"a\\\"b\\\\c\";")),
            Some(("alice".into(), "a\"b\\c".into()))
        );
        assert_eq!(creds(&format!("{m} username=bob password='x y';")), Some(("bob".into(), "x y".into())));
        // "username" inside another option's name or value is not the option.
        assert_eq!(
            creds(&format!("{m} xusername=\"no\" username = \"u\" /* c */ password=\"password=\\\"p\";")),
            Some(("u".into(), "password=\"p".into()))
        );
        assert_eq!(creds(&format!("{m} username=\"u\";")), None);
    }
}
