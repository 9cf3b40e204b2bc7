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
    for c in s.chars() {
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
    out
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
}
