//! SASL for the dev broker, as a Kafka listener with `SASL_PLAINTEXT` does
//! it: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802), through the
//! SaslHandshake and SaslAuthenticate requests. The mock cluster has no
//! SASL, so the forwarder answers these itself and lets nothing else
//! through before a login succeeds (and the mock listens only on a private
//! unix socket, so the forwarder is the only way in). Neither broker here can complete a
//! SASL login otherwise (tansu 0.6 keeps no users in its memory storage), and
//! this lets the tests drive librdkafka's real SASL client through
//! neli-run's configuration paths.
//!
//! Pure: frames in, frames out; the forwarder does the I/O.

use std::collections::HashMap;

use openssl::hash::MessageDigest;

use super::wire::{
    add_apis, put_bytes, put_string, Header, API_VERSIONS, ILLEGAL_SASL_STATE, SASL_AUTHENTICATE,
    SASL_AUTHENTICATION_FAILED, SASL_HANDSHAKE, UNSUPPORTED_SASL_MECHANISM,
};

/// What the forwarder offers, in the order Kafka lists them.
pub const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The users the broker accepts: name and password.
#[derive(Default)]
pub struct Users(pub HashMap<String, String>);

/// What to do with one request of a connection that is not logged in yet.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Pass it on to the mock (ApiVersions).
    Forward,
    /// Answer with this response frame (without its length).
    Reply(Vec<u8>),
    /// Answer with this response frame, then close the connection: a failed
    /// login, as Kafka does.
    Refuse(Vec<u8>),
    /// Close the connection without an answer: a request before the login.
    Close,
}

/// One connection's login, from the handshake to the end of the exchange.
#[derive(Default)]
pub enum Login {
    #[default]
    Handshake,
    Chosen(&'static str),
    /// Waiting for the SCRAM client-final message.
    Scram(Box<Scram>),
    Done,
}

pub struct Scram {
    digest: MessageDigest,
    salted: Vec<u8>,
    nonce: String,
    /// client-first-bare "," server-first: the start of the AuthMessage.
    so_far: String,
}

impl Login {
    pub fn done(&self) -> bool {
        matches!(self, Login::Done)
    }

    /// Handles one request before the login.
    pub fn step(&mut self, users: &Users, req: &Header) -> Step {
        match (req.api_key, &*self) {
            (API_VERSIONS, _) => Step::Forward,
            (SASL_HANDSHAKE, Login::Handshake) => {
                let wanted = req.body.clone().string().unwrap_or_default();
                let chosen = MECHANISMS.into_iter().find(|m| *m == wanted);
                let mut out = req.response();
                out.extend_from_slice(&chosen.map_or(UNSUPPORTED_SASL_MECHANISM, |_| 0).to_be_bytes());
                out.extend_from_slice(&(MECHANISMS.len() as i32).to_be_bytes());
                for m in MECHANISMS {
                    put_string(&mut out, Some(m));
                }
                match chosen {
                    Some(m) => {
                        *self = Login::Chosen(m);
                        Step::Reply(out)
                    }
                    None => Step::Refuse(out),
                }
            }
            (SASL_AUTHENTICATE, Login::Chosen(_) | Login::Scram(_)) => {
                let token = req.body.clone().bytes().unwrap_or_default();
                match self.authenticate(users, &token) {
                    Ok(reply) => Step::Reply(req.authenticate_response(0, None, &reply)),
                    Err(message) => {
                        *self = Login::Handshake;
                        Step::Refuse(req.authenticate_response(SASL_AUTHENTICATION_FAILED, Some(&message), &[]))
                    }
                }
            }
            (SASL_AUTHENTICATE, _) => Step::Refuse(req.authenticate_response(
                ILLEGAL_SASL_STATE,
                Some("SaslAuthenticate before SaslHandshake"),
                &[],
            )),
            _ => Step::Close,
        }
    }

    /// One SaslAuthenticate token in; the reply token out, or why not.
    fn authenticate(&mut self, users: &Users, token: &[u8]) -> Result<Vec<u8>, String> {
        let failed = |mechanism: &str| {
            format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
        };
        match std::mem::take(self) {
            Login::Chosen("PLAIN") => {
                // authzid NUL user NUL password
                let mut parts = token.split(|b| *b == 0).map(|p| String::from_utf8_lossy(p).into_owned());
                let (_, user, password) = (parts.next(), parts.next(), parts.next());
                match (user, password) {
                    (Some(u), Some(p)) if users.0.get(&u) == Some(&p) => {
                        *self = Login::Done;
                        Ok(Vec::new())
                    }
                    _ => Err(failed("PLAIN")),
                }
            }
            Login::Chosen(mechanism) => {
                let digest =
                    if mechanism == "SCRAM-SHA-256" { MessageDigest::sha256() } else { MessageDigest::sha512() };
                let first = String::from_utf8_lossy(token).into_owned();
                let (scram, reply) = Scram::first(digest, users, &first).ok_or_else(|| failed(mechanism))?;
                *self = Login::Scram(Box::new(scram));
                Ok(reply.into_bytes())
            }
            Login::Scram(scram) => {
                let reply = scram.last(&String::from_utf8_lossy(token)).ok_or_else(|| failed("SCRAM"))?;
                *self = Login::Done;
                Ok(reply.into_bytes())
            }
            Login::Handshake | Login::Done => Err("unexpected SaslAuthenticate".into()),
        }
    }
}

impl Scram {
    const ITERATIONS: usize = 4096;

    /// Takes the client-first message ("n,,n=USER,r=NONCE"); returns the
    /// exchange so far and the server-first message.
    fn first(digest: MessageDigest, users: &Users, message: &str) -> Option<(Scram, String)> {
        // The GS2 header ("n,," or "n,a=authzid,") ends at its second comma.
        let bare = message.splitn(3, ',').nth(2)?;
        let user = attribute(bare, 'n')?.replace("=2C", ",").replace("=3D", "=");
        let client_nonce = attribute(bare, 'r')?;
        let password = users.0.get(&user)?;
        let mut salt = [0u8; 16];
        let mut ours = [0u8; 18];
        openssl::rand::rand_bytes(&mut salt).ok()?;
        openssl::rand::rand_bytes(&mut ours).ok()?;
        let nonce = format!("{client_nonce}{}", openssl::base64::encode_block(&ours));
        let mut salted = vec![0u8; digest.size()];
        openssl::pkcs5::pbkdf2_hmac(password.as_bytes(), &salt, Self::ITERATIONS, digest, &mut salted).ok()?;
        let server_first = format!("r={nonce},s={},i={}", openssl::base64::encode_block(&salt), Self::ITERATIONS);
        let so_far = format!("{bare},{server_first}");
        Some((Scram { digest, salted, nonce, so_far }, server_first))
    }

    /// Checks the client-final message ("c=biws,r=NONCE,p=PROOF"); returns
    /// the server-final message ("v=SIGNATURE").
    fn last(&self, message: &str) -> Option<String> {
        let (without_proof, proof) = message.rsplit_once(",p=")?;
        if attribute(without_proof, 'r')? != self.nonce {
            return None;
        }
        let auth_message = format!("{},{without_proof}", self.so_far);
        let client_key = hmac(self.digest, &self.salted, b"Client Key")?;
        let stored_key = openssl::hash::hash(self.digest, &client_key).ok()?;
        let signature = hmac(self.digest, &stored_key, auth_message.as_bytes())?;
        let expected: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let proof = openssl::base64::decode_block(proof).ok()?;
        if proof.len() != expected.len() || !openssl::memcmp::eq(&proof, &expected) {
            return None;
        }
        let server_key = hmac(self.digest, &self.salted, b"Server Key")?;
        let server_signature = hmac(self.digest, &server_key, auth_message.as_bytes())?;
        Some(format!("v={}", openssl::base64::encode_block(&server_signature)))
    }
}

/// The value of `key=` in a SCRAM message.
fn attribute(message: &str, key: char) -> Option<&str> {
    message.split(',').find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
}

fn hmac(digest: MessageDigest, key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    let key = openssl::pkey::PKey::hmac(key).ok()?;
    let mut signer = openssl::sign::Signer::new(digest, &key).ok()?;
    signer.update(data).ok()?;
    signer.sign_to_vec().ok()
}

/// Adds SaslHandshake (v0-1) and SaslAuthenticate (v0-1) to an ApiVersions
/// response frame of `version` (without its length), so that clients
/// configured for SASL go on to log in. None if the frame is not one.
pub fn advertise(frame: &[u8], version: i16) -> Option<Vec<u8>> {
    add_apis(frame, version, &[(SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1)])
}

impl Header<'_> {
    /// A response frame's start: its correlation id (response header v0).
    fn response(&self) -> Vec<u8> {
        self.correlation.to_be_bytes().to_vec()
    }

    fn authenticate_response(&self, error: i16, message: Option<&str>, token: &[u8]) -> Vec<u8> {
        let mut out = self.response();
        out.extend_from_slice(&error.to_be_bytes());
        put_string(&mut out, message);
        put_bytes(&mut out, token);
        if self.version >= 1 {
            out.extend_from_slice(&0i64.to_be_bytes()); // no session lifetime
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Reader;
    use super::*;

    fn users() -> Users {
        Users([("alice".to_string(), "s3cret".to_string())].into_iter().collect())
    }

    /// A login's step on a request frame, read as the forwarder reads it:
    /// a frame without a header closes the connection before the login.
    fn login_step(login: &mut Login, frame: &[u8]) -> Step {
        Header::parse(frame).map_or(Step::Close, |header| login.step(&users(), &header))
    }

    fn request(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
        let mut f = api_key.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&5i32.to_be_bytes());
        f.extend_from_slice(&(-1i16).to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    fn handshake(mechanism: &str) -> Vec<u8> {
        let mut body = Vec::new();
        put_string(&mut body, Some(mechanism));
        request(SASL_HANDSHAKE, 1, &body)
    }

    fn authenticate(token: &[u8]) -> Vec<u8> {
        let mut body = (token.len() as i32).to_be_bytes().to_vec();
        body.extend_from_slice(token);
        request(SASL_AUTHENTICATE, 1, &body)
    }

    /// The error code and token of a SaslAuthenticate v1 response.
    fn answer(step: &Step) -> (i16, Vec<u8>) {
        let (Step::Reply(f) | Step::Refuse(f)) = step else { panic!("no answer: {step:?}") };
        let mut r = Reader { buf: f, at: 4 };
        let error = r.i16().unwrap();
        let len = r.i16().unwrap();
        r.take(len.max(0) as usize).unwrap();
        (error, r.bytes().unwrap())
    }

    #[test]
    fn plain_logs_in_with_the_right_password_only() {
        for (password, ok) in [("s3cret", true), ("wrong", false)] {
            let mut login = Login::default();
            assert!(matches!(login_step(&mut login, &handshake("PLAIN")), Step::Reply(_)));
            let step = login_step(&mut login, &authenticate(format!("\0alice\0{password}").as_bytes()));
            assert_eq!(answer(&step).0, if ok { 0 } else { SASL_AUTHENTICATION_FAILED });
            assert_eq!(matches!(step, Step::Refuse(_)), !ok);
            assert_eq!(login.done(), ok);
        }
    }

    /// The client side of RFC 5802, written from the RFC, to drive the
    /// server through a whole exchange.
    fn scram_login(mechanism: &str, digest: MessageDigest, password: &str) -> (Login, Step) {
        let mut login = Login::default();
        assert!(matches!(login_step(&mut login, &handshake(mechanism)), Step::Reply(_)));
        let bare = "n=alice,r=clientnonce";
        let (error, server_first) = answer(&login_step(&mut login, &authenticate(format!("n,,{bare}").as_bytes())));
        assert_eq!(error, 0);
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = attribute(&server_first, 'r').unwrap();
        assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
        let salt = openssl::base64::decode_block(attribute(&server_first, 's').unwrap()).unwrap();
        let iterations: usize = attribute(&server_first, 'i').unwrap().parse().unwrap();
        let mut salted = vec![0u8; digest.size()];
        openssl::pkcs5::pbkdf2_hmac(password.as_bytes(), &salt, iterations, digest, &mut salted).unwrap();
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{bare},{server_first},{without_proof}");
        let client_key = hmac(digest, &salted, b"Client Key").unwrap();
        let stored = openssl::hash::hash(digest, &client_key).unwrap();
        let sig = hmac(digest, &stored, auth.as_bytes()).unwrap();
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(k, s)| k ^ s).collect();
        let last = format!("{without_proof},p={}", openssl::base64::encode_block(&proof));
        let step = login_step(&mut login, &authenticate(last.as_bytes()));
        if let Step::Reply(_) = step {
            let server_key = hmac(digest, &salted, b"Server Key").unwrap();
            let want = hmac(digest, &server_key, auth.as_bytes()).unwrap();
            let v = format!("v={}", openssl::base64::encode_block(&want));
            assert_eq!(answer(&step).1, v.into_bytes(), "the server proves it knows the password too");
        }
        (login, step)
    }

    #[test]
    fn scram_sha_256_and_512_log_in_with_the_right_password_only() {
        for (mechanism, digest) in
            [("SCRAM-SHA-256", MessageDigest::sha256()), ("SCRAM-SHA-512", MessageDigest::sha512())]
        {
            let (login, step) = scram_login(mechanism, digest, "s3cret");
            assert!(login.done() && answer(&step).0 == 0, "{mechanism}");
            let (login, step) = scram_login(mechanism, digest, "wrong");
            assert!(!login.done() && matches!(step, Step::Refuse(_)), "{mechanism}");
            assert_eq!(answer(&step).0, SASL_AUTHENTICATION_FAILED);
        }
    }

    #[test]
    fn scram_refuses_an_unknown_user_at_once() {
        let mut login = Login::default();
        login_step(&mut login, &handshake("SCRAM-SHA-256"));
        let step = login_step(&mut login, &authenticate(b"n,,n=mallory,r=x"));
        assert!(matches!(step, Step::Refuse(_)));
    }

    #[test]
    fn unknown_mechanisms_and_requests_before_the_login_are_refused() {
        let mut login = Login::default();
        assert!(matches!(login_step(&mut login, &handshake("GSSAPI")), Step::Refuse(_)));
        assert_eq!(login_step(&mut Login::default(), &request(3, 12, &[])), Step::Close, "Metadata before the login");
        let metadata = request(3, 12, &[0] /* header tagged fields */);
        assert_eq!(login_step(&mut Login::default(), &metadata), Step::Close, "a whole header, still before the login");
        assert_eq!(
            login_step(&mut Login::default(), &request(API_VERSIONS, 3, &[0]) /* header tagged fields */),
            Step::Forward
        );
        let step = login_step(&mut Login::default(), &authenticate(b"\0alice\0s3cret"));
        assert!(matches!(step, Step::Refuse(_)), "authenticate before the handshake");
    }

    #[test]
    fn api_versions_responses_gain_the_two_sasl_apis() {
        // v3 (flexible): one API (Metadata 0-12) and a throttle time.
        let mut v3 = vec![0, 0, 0, 5, 0, 0, 2, 0, 3, 0, 0, 0, 12, 0];
        v3.extend_from_slice(&[0, 0, 0, 0, 0]);
        let out = advertise(&v3, 3).unwrap();
        assert_eq!(&out[..7], &[0, 0, 0, 5, 0, 0, 4]);
        assert_eq!(&out[7..21], &[0, 17, 0, 0, 0, 1, 0, 0, 36, 0, 0, 0, 1, 0]);
        assert_eq!(&out[21..], &v3[7..]);
        // v1 (classic): an i32 count, six bytes an API.
        let v1 = [0, 0, 0, 5, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 12, 0, 0, 0, 0];
        let out = advertise(&v1, 1).unwrap();
        assert_eq!(&out[6..10], &3i32.to_be_bytes());
        assert_eq!(&out[10..22], &[0, 17, 0, 0, 0, 1, 0, 36, 0, 0, 0, 1]);
        assert_eq!(&out[22..], &v1[10..]);
        assert!(advertise(&[0, 1], 3).is_none());
    }
}
