//! Strings that others chose, made safe to print: one escaper for the
//! names, hosts and reasons read from the topic, shared by the core, the
//! Kafka adapter, the shell and `status` (it lives apart so that the core
//! need not import the adapter for it).

/// `s` safe to print on a terminal: control characters (`char::is_control`:
/// ESC, newline, carriage return ...), Unicode bidi controls and line
/// separators are escaped as Rust writes them (`\u{1b}`, `\n`), and so is
/// the backslash itself, so an escape cannot be forged either. For strings
/// read from the topic, which anyone who may write to it chose.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    s.chars().for_each(|c| escape(&mut out, c));
    out
}

/// A command's output safe to print on a terminal, line by line: as
/// `printable`, but newlines and tabs stay what they are, and a byte that
/// is not UTF-8 is written `\x{ff}`. For `neli-run logs`.
pub fn printable_output(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' | '\t' => out.push(c),
                c => escape(&mut out, c),
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{{{byte:02x}}}"));
        }
    }
    out
}

fn escape(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{061c}'
        | '\u{2028}'
        | '\u{2029}' => out.extend(c.escape_unicode()),
        c if c.is_control() => out.extend(c.escape_unicode()),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls_bidi_and_backslashes_only() {
        assert_eq!(printable("web-2 ü 名"), "web-2 ü 名");
        assert_eq!(printable("evil\u{1b}[2J\nfake\r\t"), r"evil\u{1b}[2J\nfake\r\t");
        assert_eq!(printable("a\u{7f}\u{9b}\u{0}"), r"a\u{7f}\u{9b}\u{0}");
        assert_eq!(printable("\u{202e}\u{2066}\u{2069}\u{2028}"), r"\u{202e}\u{2066}\u{2069}\u{2028}");
        assert_eq!(printable(r"a\u{1b}"), r"a\\u{1b}", "an escape cannot be forged");
    }

    #[test]
    fn output_keeps_its_lines_and_tabs_and_escapes_the_rest() {
        assert_eq!(printable_output(b"a\tb\nc\r\x1b[2J\xff\\ \xc3\xbc\n"), "a\tb\nc\\r\\u{1b}[2J\\x{ff}\\\\ \u{fc}\n");
    }
}
