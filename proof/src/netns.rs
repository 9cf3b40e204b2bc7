//! A test host: a network namespace joined to this one by a veth pair, whose
//! link can be cut by dropping its packets with nftables. Sockets stay open,
//! as in a real partition, so neither side learns of the cut from the kernel.
//! Needs root, `ip` (iproute2) and `nft` (nftables).

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where this process starts looking for a free namespace number.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// One namespace; deleted (and its cut healed) on drop.
pub struct NetNs {
    name: String,
    host_if: String,
    /// The host side's address. The namespace routes everything through it,
    /// so a broker on 0.0.0.0 is reachable at this or any other host address.
    pub host_ip: String,
}

impl NetNs {
    /// Creates a namespace, or says why this machine cannot. Its number is
    /// claimed with `ip netns add`, which fails if another process (a test
    /// run, a soak) holds it: never taken over, which would cut that
    /// process's hosts off.
    pub fn create() -> Result<NetNs, String> {
        let start = std::process::id() % 250 + NEXT.fetch_add(1, Ordering::Relaxed) % 250;
        let mut claimed = None;
        for n in (0..250).map(|i| (start + i) % 250) {
            let add = Command::new("ip").args(["netns", "add", &format!("neli-t{n}")]).output();
            match add {
                Ok(out) if out.status.success() => {
                    claimed = Some(n);
                    break;
                }
                Ok(out) if String::from_utf8_lossy(&out.stderr).contains("File exists") => continue,
                Ok(out) => {
                    return Err(format!(
                        "cannot create a network namespace (`ip netns add`: {}; needs root)",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
                Err(err) => return Err(format!("cannot run `ip` ({err}); install iproute2")),
            }
        }
        let n = claimed.ok_or("every test network namespace name is taken (ip netns list; delete stale neli-t*)")?;
        let ns = NetNs { name: format!("neli-t{n}"), host_if: format!("nrh{n}"), host_ip: format!("10.231.{n}.1") };
        let peer = format!("nrn{n}");
        // A veth of this number left by a process that died without cleaning
        // up: the namespace number is ours now, so the link is too.
        let _ = Command::new("ip").args(["link", "del", &ns.host_if]).stderr(Stdio::null()).status();
        let inner = format!("10.231.{n}.2/24");
        let host = format!("{}/24", ns.host_ip);
        let steps: [&[&str]; 8] = [
            &["link", "add", &ns.host_if, "type", "veth", "peer", "name", &peer],
            &["link", "set", &peer, "netns", &ns.name],
            &["addr", "add", &host, "dev", &ns.host_if],
            &["link", "set", &ns.host_if, "up"],
            &["-n", &ns.name, "addr", "add", &inner, "dev", &peer],
            &["-n", &ns.name, "link", "set", &peer, "up"],
            &["-n", &ns.name, "link", "set", "lo", "up"],
            &["-n", &ns.name, "route", "add", "default", "via", &ns.host_ip],
        ];
        for step in steps {
            let ok = Command::new("ip").args(step).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
            if !ok {
                return Err(format!(
                    "cannot create a network namespace (`ip {}` failed; needs root and iproute2)",
                    step.join(" ")
                ));
            }
        }
        let nft = Command::new("nft").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
        if !nft {
            return Err("nft (nftables) is not installed".into());
        }
        Ok(ns)
    }

    /// Runs a command inside the namespace (`ip netns exec` execs it, so
    /// the pid is the command's).
    pub fn exec_prefix(&self) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.name.clone()]
    }

    fn table(&self) -> String {
        format!("neli_cut_{}", self.host_if)
    }

    /// Drops every packet between the namespace and the host, both ways.
    pub fn cut(&self) {
        let t = self.table();
        let rules = format!(
            "table inet {t} {{\n chain input {{ type filter hook input priority -300; iifname \"{i}\" drop; }}\n \
             chain output {{ type filter hook output priority -300; oifname \"{i}\" drop; }}\n}}\n",
            i = self.host_if
        );
        let mut nft = Command::new("nft").args(["-f", "-"]).stdin(Stdio::piped()).spawn().expect("run nft");
        nft.stdin.take().expect("piped").write_all(rules.as_bytes()).expect("write the rules");
        assert!(nft.wait().expect("nft").success(), "nft could not install the cut");
    }

    /// Lets packets through again.
    pub fn heal(&self) {
        let _ = Command::new("nft").args(["delete", "table", "inet", &self.table()]).stderr(Stdio::null()).status();
    }

    /// What deletes this namespace, for a runner's signal handler: a runner
    /// stopped with ^C must leave no namespace behind either.
    pub fn deleter(&self) -> impl FnOnce() + Send + 'static {
        let (name, host_if) = (self.name.clone(), self.host_if.clone());
        move || {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
            let _ = Command::new("ip").args(["link", "del", &host_if]).stderr(Stdio::null()).status();
        }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.heal();
        self.deleter()();
    }
}
