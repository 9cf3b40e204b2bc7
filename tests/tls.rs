//! TLS against a real broker. Neither broker here terminates TLS itself
//! (tansu 0.6 takes --cert/--key but never hands its connections to the TLS
//! acceptor), so socat terminates it in front of them: the broker advertises
//! socat's port, so every connection the client makes is TLS, verified
//! against a CA made for the test.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{bin, wait_until, Group};

fn have(tool: &str) -> bool {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status();
    found.is_ok_and(|s| s.success())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl").args(args).current_dir(dir).stderr(Stdio::null()).status().unwrap().success();
    assert!(ok, "openssl {args:?} failed");
}

/// A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA.
fn certificates(dir: &Path) {
    let ca = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"];
    openssl(dir, &[&ca[..], &["-subj", "/CN=neli-test-ca", "-keyout", "ca-key.pem", "-out", "ca.pem"]].concat());
    openssl(dir, &[&ca[..], &["-subj", "/CN=other-ca", "-keyout", "other-key.pem", "-out", "other.pem"]].concat());
    let csr = ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server-key.pem"];
    openssl(dir, &[&csr[..], &["-out", "server.csr"]].concat());
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.pem",
        ],
    );
}

/// Processes killed on drop.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

/// `backend` (given its plain port and the TLS port to advertise) behind a
/// socat TLS terminator; returns the TLS address.
fn behind_tls(dir: &Path, backend: impl Fn(u16, u16) -> Command) -> Option<(String, Procs)> {
    if !have("socat") || !have("openssl") {
        crate::util::skip("needs socat and openssl (apt-get install socat openssl)");
        return None;
    }
    certificates(dir);
    let (plain, tls) = (free_port(), free_port());
    let broker = backend(plain, tls).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start the broker");
    let socat = Command::new("socat")
        .arg(format!(
            "OPENSSL-LISTEN:{tls},bind=127.0.0.1,reuseaddr,fork,cert={0}/server.pem,key={0}/server-key.pem,verify=0",
            dir.display()
        ))
        .arg(format!("TCP:127.0.0.1:{plain}"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start socat");
    let procs = Procs(vec![broker, socat]);
    wait_until(Duration::from_secs(20), "the broker and socat listen", || {
        TcpStream::connect(("127.0.0.1", plain)).is_ok() && TcpStream::connect(("127.0.0.1", tls)).is_ok()
    });
    Some((format!("127.0.0.1:{tls}"), procs))
}

/// Elects over TLS (settings from a Java properties file, as Kafka users
/// have them), then shows that an unknown CA is refused with a clear reason.
fn elects_over_tls_and_names_a_certificate_failure(test: &str, backend: impl Fn(u16, u16) -> Command) {
    let mut group = Group::new(test);
    let dir = group.dir.path().to_path_buf();
    let Some((address, _procs)) = behind_tls(&dir, backend) else { return };
    group.broker.address = address;

    let props = dir.join("client.properties");
    std::fs::write(&props, format!("security.protocol=SSL\nssl.ca.location={}/ca.pem\n", dir.display())).unwrap();
    let props = props.display().to_string();
    let mut a = group.member("a", &["--kafka-config", &props], &["sleep", "1000"]);
    wait_until(group.broker.timing.takeover(), "the child runs over TLS", || group.starts().len() == 1);

    let other = format!("ssl.ca.location={}/other.pem", dir.display());
    let mut b = group.member_unguarded(
        "b",
        &["-X", "security.protocol=ssl", "-X", &other, "--acquire-timeout", "4s"],
        &["true"],
    );
    let status = b.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(75), "gives up at --acquire-timeout");
    let log = b.log();
    assert!(log.contains("certificate verify failed"), "names the TLS failure: {log}");
    assert!(log.contains("ssl.ca.location"), "names the setting to fix: {log}");
    a.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(20)).code(), Some(143));
    group.assert_no_overlap();
}

#[test]
fn tls_on_the_dev_broker() {
    elects_over_tls_and_names_a_certificate_failure("tls-dev", |plain, tls| {
        let mut c = Command::new(bin());
        c.args(["dev-broker", "--listen", &format!("127.0.0.1:{plain}"), "--advertise", &format!("127.0.0.1:{tls}")]);
        c
    });
}

#[test]
fn tls_on_tansu() {
    let Some(tansu) = neli_proof::brokers::find("tansu") else {
        crate::util::skip("tansu 0.6.0 is not installed (.ci/run shows how)");
        return;
    };
    elects_over_tls_and_names_a_certificate_failure("tls-tansu", |plain, tls| {
        let mut c = Command::new(&tansu);
        c.args(["broker", "--listener-url", &format!("tcp://127.0.0.1:{plain}")])
            .args(["--advertised-listener-url", &format!("tcp://127.0.0.1:{tls}")])
            .args(["--storage-engine", "memory://tansu/"]);
        c
    });
}
