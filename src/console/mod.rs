//! `neli-run console`: one web page of a group, served by neli-run itself.
//!
//! A reader, not a member: it never joins the group. A thread of its own
//! follows the group's partitions as `status --watch` does (through
//! `crate::status::Follower`: the same view and the same JSON, plus each
//! role's leaderships; read again as the group grows) and the runs topic
//! as `history` reads it (`runs.rs`), and keeps what they say in memory;
//! each request draws the page from that (`page.rs`, the SVG timeline in
//! `timeline.rs`), so a page costs the brokers nothing and a reload does
//! not wait on Kafka.
//!
//! Loopback by default: the page shows the members, their hosts and the
//! commands' output, which are not for everyone who can reach a port.
//! Anywhere else it needs a token (`--token-file`, or
//! NELI_CONSOLE_TOKEN), never given on the command line (every local user
//! can read argv).

mod http;
mod page;
mod runs;
mod timeline;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::ConsoleArgs;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::printable;
use crate::status::{Follower, Lead};

/// What the page is drawn from: the follower's newest reading.
pub struct Shared {
    group: String,
    /// What `status --json` would print.
    status: Value,
    leads: Vec<Vec<Lead>>,
    store: runs::Store,
    /// Why the group's topic cannot be read now, if it cannot.
    error: Option<String>,
}

/// Runs `neli-run console`.
pub fn main(args: ConsoleArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let token = token(args.token_file.as_deref())?;
    let addr = listen_addr(&args.listen, token.is_some())?;
    let target = Target::from_args(args.kafka, env_properties)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the async runtime: {e}")))?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(addr)).map_err(|e| {
        Failure::new(Kind::Usage, format!("cannot listen on {addr}: {e} (choose another --listen ADDR:PORT)"))
    })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let shared = Arc::new(Mutex::new(Shared {
        group: target.group.clone(),
        status: Value::Null,
        leads: Vec::new(),
        store: runs::Store::default(),
        error: Some("reading the group's topic".into()),
    }));
    let follower = shared.clone();
    std::thread::Builder::new()
        .name("console-reader".into())
        .spawn(move || follow(&target, &follower))
        .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the reader thread: {e}")))?;
    crate::stderr::line(format_args!("console of group {} on http://{bound}/", printable(&shared_group(&shared))));
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            return Err(Failure::new(Kind::Internal, "cannot watch SIGTERM and SIGINT"));
        };
        tokio::select! {
            () = http::serve(listener, shared, token.map(Arc::from)) => {}
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(0)
    })
}

fn shared_group(shared: &Mutex<Shared>) -> String {
    shared.lock().map(|s| s.group.clone()).unwrap_or_default()
}

/// The token: the file's contents less one trailing newline, else
/// NELI_CONSOLE_TOKEN; none if neither.
fn token(file: Option<&std::path::Path>) -> Result<Option<String>, Failure> {
    let token = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::new(Kind::Usage, format!("--token-file {}: {e}", printable(&path.display().to_string())))
            })?;
            Some(text.strip_suffix('\n').unwrap_or(&text).to_string())
        }
        None => std::env::var("NELI_CONSOLE_TOKEN").ok(),
    };
    match token {
        Some(t) if t.trim().is_empty() || t.contains(['\r', '\n']) => Err(Failure::new(
            Kind::Usage,
            "the console's token is empty or has a line break: put one line in --token-file FILE or \
             NELI_CONSOLE_TOKEN",
        )),
        other => Ok(other),
    }
}

/// `--listen`'s address; anything but loopback only with a token.
fn listen_addr(listen: &str, has_token: bool) -> Result<SocketAddr, Failure> {
    let addrs: Vec<SocketAddr> = listen.to_socket_addrs().map(Iterator::collect).map_err(|e| {
        Failure::new(Kind::Usage, format!("--listen {}: {e} (give HOST:PORT, e.g. 127.0.0.1:9465)", printable(listen)))
    })?;
    let Some(&addr) = addrs.first() else {
        return Err(Failure::new(Kind::Usage, format!("--listen {}: no address", printable(listen))));
    };
    if !has_token && !addr.ip().is_loopback() {
        return Err(Failure::new(
            Kind::Usage,
            format!(
                "--listen {}: not a loopback address, and the console has no token: anyone who reaches it would \
                 see the group's members, hosts and output. Give a token (--token-file FILE or \
                 NELI_CONSOLE_TOKEN), or listen on 127.0.0.1 and reach it through `ssh -L 9465:127.0.0.1:9465`",
                printable(listen)
            ),
        ));
    }
    Ok(addr)
}

/// The reader thread: follows the group's topic (waiting for it to be
/// made, and reading it again as it grows) and the runs topic, and puts
/// what they say where the page reads it, for ever.
fn follow(target: &Target, shared: &Mutex<Shared>) {
    let mut reader = runs::Reader::new(&target.topic);
    let mut follower: Option<Follower> = None;
    let mut retry = Instant::now();
    loop {
        if follower.is_none() && Instant::now() >= retry {
            match Follower::open(target) {
                Ok(f) => follower = Some(f),
                Err(e) => {
                    lock(shared).error = Some(waiting(e));
                    retry = Instant::now() + Duration::from_secs(5);
                }
            }
            if let Err(e) = reader.open(target) {
                reader.note = Some(e.message);
            }
        }
        if reader.note.is_some() && Instant::now() >= retry {
            let _ = reader.open(target);
            retry = Instant::now() + Duration::from_secs(5);
        }
        let grown = match follower.as_mut() {
            Some(f) => {
                f.poll(Duration::from_millis(500));
                f.grow().err().map(|e| e.message)
            }
            None => {
                std::thread::sleep(Duration::from_millis(500));
                None
            }
        };
        let read = reader.poll(Duration::ZERO);
        let (status, leads) = follower.as_ref().map_or((Value::Null, Vec::new()), |f| (f.json(), f.leads().to_vec()));
        let mut shared = lock(shared);
        shared.store.take_all(read, reader.note.clone());
        if follower.is_some() {
            (shared.status, shared.leads, shared.error) = (status, leads, grown);
        }
    }
}

/// What the page says while the group's topic cannot be read: a topic not
/// made yet is waited for, not an error (the console may start first).
fn waiting(failure: Failure) -> String {
    match failure.kind {
        Kind::NoLeader => {
            format!("{}; waiting for its topic (the page shows the group once a member makes it)", failure.message)
        }
        _ => failure.message,
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_needs_no_token_and_anywhere_else_does() {
        assert!(listen_addr("127.0.0.1:0", false).is_ok());
        assert!(listen_addr("[::1]:0", false).is_ok());
        let refused = listen_addr("0.0.0.0:9465", false).unwrap_err();
        assert!(refused.message.contains("--token-file FILE or NELI_CONSOLE_TOKEN"), "{}", refused.message);
        assert!(listen_addr("0.0.0.0:9465", true).is_ok());
        assert!(listen_addr("no-port", false).is_err());
    }
}
