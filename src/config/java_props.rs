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
}
