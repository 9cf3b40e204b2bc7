//! The request side of neli-run's two small HTTP servers, `/metrics`
//! (`crate::metrics`) and the console (`crate::console`): each reads one
//! request head a connection, answers GET or HEAD on a few paths and closes
//! the connection, which needs no HTTP framework. The head is read within a
//! size and a time a client cannot stretch: these ports face whoever can
//! reach them.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// How long a client may take to send its request head.
const WITHIN: Duration = Duration::from_secs(5);

/// The request head `stream` sends: up to the blank line that ends it,
/// the client's end, or `cap` bytes (a little more at most; what a longer
/// head says past that is not read). None: not sent within 5 s, and the
/// connection is not answered.
pub async fn read_head(stream: &mut TcpStream, cap: usize) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while head.len() < cap {
            let n = match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            head.extend_from_slice(&buf[..n]);
            // Only the new bytes can end it: a head sent a byte at a time
            // is not searched again from its start at every byte.
            if head[head.len().saturating_sub(n + 3)..].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    };
    tokio::time::timeout(WITHIN, read).await.ok()?;
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A request head's method, its target, and the value of its header
/// `name` (the first of that name, in any case), each "" or None when the
/// head lacks it.
pub fn parse<'a>(head: &'a str, name: &str) -> (&'a str, &'a str, Option<&'a str>) {
    let mut lines = head.split("\r\n");
    let mut words = lines.next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let value = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(header, _)| header.trim().eq_ignore_ascii_case(name))
        .map(|(_, value)| value.trim());
    (method, target, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// What `read_head` makes of a client that sends `sent` and then
    /// keeps its connection open, and how long it took.
    fn head_of(sent: Vec<u8>, cap: usize) -> (Option<String>, Duration) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            let writer = tokio::spawn(async move {
                for byte in sent.chunks(7) {
                    if client.write_all(byte).await.is_err() {
                        break;
                    }
                }
                client
            });
            let at = std::time::Instant::now();
            let head = read_head(&mut server, cap).await;
            let took = at.elapsed();
            drop(writer.await);
            (head, took)
        })
    }

    #[test]
    fn a_head_is_read_to_its_blank_line_a_longer_one_to_the_cap_and_a_slow_one_not_at_all() {
        let (head, _) = head_of(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 8192);
        assert_eq!(head.as_deref(), Some("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        // No blank line, ever: read to the cap and answered, not waited on.
        let (head, took) = head_of(vec![b'a'; 20_000], 8192);
        let len = head.map(|h| h.len()).unwrap_or_default();
        assert!((8192..8192 + 1024).contains(&len), "{len} bytes");
        assert!(took < WITHIN, "{took:?}");
        // A head that never ends, from a client that stays: not answered.
        let (head, took) = head_of(b"GET / HTTP/1.1\r\n".to_vec(), 8192);
        assert_eq!(head, None);
        assert!(took >= WITHIN, "{took:?}");
    }

    #[test]
    fn the_method_the_target_and_one_header_any_case() {
        let head = "GET /a?b HTTP/1.1\r\nHost: x\r\naccept:  text/plain \r\n\r\nAccept: body";
        assert_eq!(parse(head, "Accept"), ("GET", "/a?b", Some("text/plain")));
        assert_eq!(parse(head, "authorization"), ("GET", "/a?b", None));
        assert_eq!(parse("", "accept"), ("", "", None));
    }
}
