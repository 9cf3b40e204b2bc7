//! A client that speaks Kafka's wire format by hand: for the bytes a broker
//! answers with (what kafka-python and kafkajs read from the dev broker)
//! and for request orders no client library sends on demand (tansu's ghost
//! leader).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One connection, one request at a time.
pub struct Raw {
    stream: TcpStream,
    client: &'static str,
    correlation: i32,
}

impl Raw {
    /// Connects to `address` as client id `client` (a broker may tell
    /// clients apart by it, as tansu does for group members).
    pub fn connect(address: &str, client: &'static str) -> Raw {
        let stream = TcpStream::connect(address).expect("connected to the broker");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Raw { stream, client, correlation: 0 }
    }

    /// Sends a request (header v1, or v2 with its tagged fields when
    /// `flexible`) and returns its answer after the correlation id.
    pub fn ask(&mut self, api_key: i16, version: i16, flexible: bool, body: &[u8]) -> Vec<u8> {
        self.correlation += 1;
        let mut f = api_key.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&self.correlation.to_be_bytes());
        f.extend(string(self.client));
        if flexible {
            f.push(0);
        }
        f.extend_from_slice(body);
        self.stream.write_all(&(f.len() as u32).to_be_bytes()).unwrap();
        self.stream.write_all(&f).unwrap();
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("an answer");
        let mut answer = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut answer).unwrap();
        assert_eq!(answer[..4], self.correlation.to_be_bytes(), "the answer to this request");
        answer.split_off(4)
    }
}

impl Raw {
    /// Whether the broker has closed the connection (waits up to the read
    /// timeout for it; anything read instead is a failure).
    pub fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(n) => n == 0,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// A protocol STRING: an i16 length, then the bytes.
pub fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as i16).to_be_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// A protocol BYTES: an i32 length, then the bytes.
pub fn bytes(b: &[u8]) -> Vec<u8> {
    let mut out = (b.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(b);
    out
}

pub fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

pub fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A protocol STRING at `at` (a null one read as empty), moving `at` past it.
pub fn read_string(b: &[u8], at: &mut usize) -> String {
    let len = i16_at(b, *at).max(0) as usize;
    *at += 2;
    let s = String::from_utf8_lossy(&b[*at..*at + len]).into_owned();
    *at += len;
    s
}
