//! The console's HTTP server, as small as `/metrics`' (`crate::metrics`):
//! one request head read per connection (`crate::http`), GET or HEAD answered, the
//! connection closed. Four paths: the page, its `main` (what the script
//! fetches again), the script, and the timeline alone as an SVG file.
//!
//! With a token, every request must carry it: as the password of basic
//! auth (a browser asks for it; any user name) or as `Authorization:
//! Bearer TOKEN`. It is compared in constant time (for tokens of one
//! length: a token's length is not a secret worth a crate).

use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::page;
use super::timeline::{self, Range};
use super::Shared;
use crate::clock::wall_ms;

/// Connections answered at once; more wait for a turn.
const AT_ONCE: usize = 32;

/// Answers every connection `listener` accepts, for ever.
pub async fn serve(listener: TcpListener, shared: Arc<Mutex<Shared>>, token: Option<Arc<str>>) {
    let turns = Arc::new(Semaphore::new(AT_ONCE));
    while let Ok((stream, _)) = listener.accept().await {
        let Ok(turn) = turns.clone().acquire_owned().await else { return };
        let (shared, token) = (shared.clone(), token.clone());
        tokio::spawn(async move {
            answer(stream, &shared, token.as_deref()).await;
            drop(turn);
        });
    }
}

async fn answer(mut stream: TcpStream, shared: &Mutex<Shared>, token: Option<&str>) {
    let Some(head) = crate::http::read_head(&mut stream, 16384).await else { return };
    let reply = reply(&head, shared, token);
    let _ = stream.write_all(&reply).await;
    let _ = stream.shutdown().await;
}

/// The answer to the request whose head is `head`, as bytes.
pub fn reply(head: &str, shared: &Mutex<Shared>, token: Option<&str>) -> Vec<u8> {
    let (method, target, authorization) = crate::http::parse(head, "authorization");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, kind, body) = match path {
        _ if method != "GET" && method != "HEAD" => ("405 Method Not Allowed", TEXT, "GET or HEAD only\n".into()),
        _ if token.is_some_and(|token| !authorized(authorization, token)) => (
            "401 Unauthorized",
            TEXT,
            "this console needs its token: as basic auth's password, or a bearer token\n".into(),
        ),
        "/" | "/main" | "/timeline.svg" => {
            let shared = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (range, now) = (Range::parse(query), wall_ms());
            match path {
                "/" => ("200 OK", HTML, page::page(&shared, range, now)),
                "/main" => ("200 OK", HTML, page::main(&shared, range, now)),
                _ => ("200 OK", SVG, timeline::svg(&shared, range, now)),
            }
        }
        "/console.js" => ("200 OK", "text/javascript; charset=utf-8", page::SCRIPT.into()),
        _ => ("404 Not Found", TEXT, "try / (the page) or /timeline.svg?range=hour|day\n".into()),
    };
    let challenge = match status {
        "401 Unauthorized" => "WWW-Authenticate: Basic realm=\"neli-run console\", charset=\"UTF-8\"\r\n",
        "405 Method Not Allowed" => "Allow: GET, HEAD\r\n",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{challenge}Cache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nContent-Security-Policy: {CSP}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        out.push_str(&body);
    }
    out.into_bytes()
}

const TEXT: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Nothing but the page's own: its inline style, its script from itself,
/// fetches to itself; no frame may hold it.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; \
                   img-src 'self'; frame-ancestors 'none'";

/// Whether `authorization` (the header's value) carries `token`: as a
/// bearer token, or as basic auth's password (any user name).
fn authorized(authorization: Option<&str>, token: &str) -> bool {
    let Some((scheme, value)) = authorization.and_then(|a| a.split_once(' ')) else { return false };
    let given = match scheme {
        s if s.eq_ignore_ascii_case("bearer") => value.trim().as_bytes().to_vec(),
        s if s.eq_ignore_ascii_case("basic") => {
            let Some(pair) = base64(value.trim()) else { return false };
            match pair.iter().position(|&b| b == b':') {
                Some(colon) => pair[colon + 1..].to_vec(),
                None => return false,
            }
        }
        _ => return false,
    };
    same(&given, token.as_bytes())
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    std::hint::black_box(diff) == 0
}

/// Standard base64 (RFC 4648, padded or not), as basic auth sends it.
fn base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let text = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_what_basic_auth_sends() {
        assert_eq!(base64("dXNlcjpzM2NyZXQ=").as_deref(), Some(&b"user:s3cret"[..]));
        assert_eq!(base64("YQ").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64("YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64("Y"), None);
        assert_eq!(base64("a*b="), None);
    }

    #[test]
    fn a_token_is_taken_as_bearer_or_basic_password_and_nothing_else() {
        assert!(authorized(Some("Bearer s3cret"), "s3cret"));
        assert!(authorized(Some("Basic dXNlcjpzM2NyZXQ="), "s3cret"));
        assert!(!authorized(Some("Bearer s3cre"), "s3cret"));
        assert!(!authorized(Some("Bearer s3cretx"), "s3cret"));
        assert!(!authorized(Some("Basic dXNlcjpzM2NyZXQ"), "other"));
        assert!(!authorized(Some("Digest s3cret"), "s3cret"));
        assert!(!authorized(None, "s3cret"));
        assert!(same(b"", b"") && !same(b"a", b"") && !same(b"ab", b"ac"));
    }
}
