//! Everything the command started, found through the process tree.
//!
//! A process group is not a container: `setsid`, `setpgid` and double forks
//! leave it, and a `killpg` never reaches them. But the shim and neli-run are
//! child subreapers, so whatever the command started stays below them in
//! the process tree until it is reaped: an orphan goes to the nearest
//! subreaper, not to init. "Everything the command started" is therefore
//! "every process below the shim", which is what this module signals. It
//! reads /proc, so it needs no privilege; the tree is read afresh on every
//! call, since a process can fork while we sweep.
//!
//! It reads down from the root, through each process's children as the
//! kernel lists them per thread (`/proc/PID/task/TID/children`): the
//! subtree only. Reading every process of the machine instead cost a
//! graceful handover 45 ms on a host of 3,000 processes (two walks on its
//! way: the shim's pass-on of the stop signal and neli-run's sweep), where
//! 71 cost nothing a benchmark saw (docs/proof.md). A kernel without those
//! files (CONFIG_PROC_CHILDREN, in Linux since 4.2) gets the walk over
//! every process. Both read a tree that changes as they read: what forks
//! meanwhile may be missed by one walk (what moves, the walk down reads
//! twice: `down`), and every kill walks again until nothing is left
//! (`waitpid`'s ECHILD for the shim; a walk that finds no orphan for
//! neli-run, whose orphans all hang below its main thread: a subreaper's
//! first live thread takes them in).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// One process, as /proc/PID/stat gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: Pid,
    pub ppid: Pid,
    pub pgrp: Pid,
}

/// Reads /proc/PID/stat: `pid (comm) state ppid pgrp ...`, where comm may
/// hold spaces, parentheses and bytes that are not UTF-8 (a process names
/// itself), so the fields are counted from the last ')'. One read of the
/// first bytes, which hold those fields: a walk reads every process below
/// the root (every one of the machine, where the kernel lists no
/// children) on the way of every stop, and `read_to_string` probed with 32
/// bytes and grew, five reads a process.
fn stat(pid: i32) -> Option<Proc> {
    let mut buf = [0u8; 512];
    let n = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?.read(&mut buf).ok()?;
    let text = &buf[..n];
    let after = text.iter().rposition(|&b| b == b')')? + 1;
    let mut rest = std::str::from_utf8(&text[after..]).ok()?.split_whitespace().skip(1);
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some(Proc { pid: Pid::from_raw(pid), ppid: Pid::from_raw(ppid), pgrp: Pid::from_raw(pgrp) })
}

/// Every process below `root`, parents before their children.
pub fn below(root: Pid) -> Vec<Proc> {
    if children_listed() {
        down(root)
    } else {
        scan(root)
    }
}

/// Whether this kernel lists each thread's children in /proc.
fn children_listed() -> bool {
    static LISTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTED.get_or_init(|| {
        let me = nix::unistd::getpid();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    })
}

/// `below`, read down from `root`: each process's children, as each of
/// its threads lists them (a child hangs below the thread that forked it,
/// or that took it in).
///
/// Twice over: a process whose parent dies while a pass reads moves to the
/// nearest subreaper (the root, read already), and was in neither list as
/// the pass read them; the second pass finds it where it went. Seen in a
/// test (`daemons::sigterm_stops_the_daemons_within_grace_before_neli_run_exits`,
/// 7 runs in 20): the command dying of the stop signal while the shim
/// passed it on, its setsid'd daemon missed. The scan has no such gap: a
/// dead parent stays in /proc until reaped, and each process names its own.
fn down(root: Pid) -> Vec<Proc> {
    read_down(root, children, |pid| stat(pid.as_raw()))
}

/// `down`, with where each process's children and its stat are read.
fn read_down(root: Pid, mut children: impl FnMut(Pid) -> Vec<Pid>, stat: impl Fn(Pid) -> Option<Proc>) -> Vec<Proc> {
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    for _ in 0..2 {
        let mut read = HashSet::from([root]);
        let mut next = vec![root];
        while let Some(parent) = next.pop() {
            for pid in children(parent) {
                if !read.insert(pid) {
                    continue;
                }
                if !seen.insert(pid) {
                    next.push(pid);
                // Gone since it was listed: nothing left to signal.
                } else if let Some(p) = stat(pid) {
                    next.push(p.pid);
                    found.push(p);
                }
            }
        }
    }
    found
}

/// The children of every thread of `pid` (none once it is gone).
fn children(pid: Pid) -> Vec<Pid> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let mut list = Vec::new();
        let path = task.path().join("children");
        if std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut list)).is_err() {
            continue;
        }
        let text = String::from_utf8_lossy(&list);
        pids.extend(text.split_ascii_whitespace().filter_map(|n| n.parse().ok()).map(Pid::from_raw));
    }
    pids
}

/// `below`, read from every process of the machine.
fn scan(root: Pid) -> Vec<Proc> {
    let mut children: HashMap<Pid, Vec<Proc>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else { continue };
        if let Some(p) = stat(pid) {
            children.entry(p.ppid).or_default().push(p);
        }
    }
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for p in children.remove(&parent).unwrap_or_default() {
            next.push(p.pid);
            found.push(p);
        }
    }
    found
}

/// Sends `sig` to every process below `root` that `pick` selects; returns
/// how many processes were below `root`. The kill of one command: `root`
/// is its shim, and everything below it is the command's.
pub fn signal_below(root: Pid, sig: Signal, pick: impl Fn(&Proc) -> bool) -> usize {
    let procs = below(root);
    let ours: HashSet<Pid> = procs.iter().map(|p| p.pid).chain([root]).collect();
    procs.iter().filter(|p| pick(p)).for_each(|p| send(p.pid, sig, &ours));
    procs.len()
}

/// Of `procs` (below some root, parents before their children, as `below`
/// lists them), those outside the subtrees of the processes `kept` selects
/// (the ones neli-run registered: a live shim and what its command started,
/// a hook's keeper and what its line started).
pub fn outside(procs: Vec<Proc>, kept: impl Fn(Pid) -> bool) -> Vec<Proc> {
    let mut spared = HashSet::new();
    let mut left = Vec::new();
    // Parents come before their children.
    for p in procs {
        if kept(p.pid) || spared.contains(&p.ppid) {
            spared.insert(p.pid);
        } else {
            left.push(p);
        }
    }
    left
}

/// Sends `sig` to each of `procs`, read below `root` a moment ago, that is
/// still below: whose parent is `root` or one of `procs`. A process whose
/// parent died meanwhile was reparented to the nearest subreaper, `root`
/// (or neli-run, for a shim that died: the sweep's), and is still sent it.
pub fn signal(procs: &[Proc], root: Pid, sig: Signal) {
    let ours: HashSet<Pid> = procs.iter().map(|p| p.pid).chain([root]).collect();
    for p in procs {
        send(p.pid, sig, &ours);
    }
}

/// Signals `pid` only if it is still one of ours. Through a pidfd, the pid
/// cannot be reused between the check and the signal (a process listed a
/// moment ago may have been reaped since, and its number taken).
fn send(pid: Pid, sig: Signal, ours: &HashSet<Pid>) {
    // SAFETY: pidfd_open takes two integers and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        if Errno::last() == Errno::ENOSYS {
            // Kernels before 5.3: a plain kill, with the reuse window open.
            let _ = nix::sys::signal::kill(pid, sig);
        }
        return;
    }
    // SAFETY: the descriptor was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if stat(pid.as_raw()).is_some_and(|p| ours.contains(&p.ppid)) {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
        unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), sig as libc::c_int, std::ptr::null::<u8>(), 0)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn finds_processes_that_left_the_group_and_the_session() {
        // sh -> (setsid sleep) and sh -> sleep: both below the shell, in
        // another session and in the shell's group respectively.
        let mut sh = Command::new("sh")
            .args(["-c", "setsid sleep 30 & sleep 30 & echo ready; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(sh.stdout.as_mut().unwrap(), &mut ready).unwrap();
        let root = Pid::from_raw(sh.id() as i32);
        // Both start a moment after "ready"; the setsid one then leads its
        // own group.
        let escaped = |procs: &[Proc]| procs.len() == 2 && procs.iter().any(|p| p.pgrp == p.pid);
        let mut procs = below(root);
        for _ in 0..500 {
            if escaped(&procs) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            procs = below(root);
        }
        assert!(escaped(&procs), "two sleeps, one in a group of its own: {procs:?}");
        assert_eq!(signal_below(root, Signal::SIGKILL, |_| true), 2);
        let status = sh.wait().unwrap();
        assert!(status.success() || status.code().is_some(), "{status:?}");
        assert!(below(root).is_empty());
    }

    /// A process may name itself anything, bytes that are not UTF-8 and
    /// parentheses too (`/proc/self/comm`): it is below its parent all the
    /// same, and signalled with the rest.
    #[test]
    fn finds_a_process_whose_name_is_not_utf8_nor_balanced() {
        /// Kills the test's group whatever happens: a process the walk
        /// misses would loop for ever, and hold the test's output open.
        struct Group(std::process::Child);
        impl Drop for Group {
            fn drop(&mut self) {
                let _ = nix::sys::signal::killpg(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
                let _ = self.0.wait();
            }
        }
        // sh -> (subshell named "\377) (x") -> sleep, over and over.
        let mut sh = Group(
            Command::new("sh")
                .args([
                    "-c",
                    r"(printf '\377) (x' > /proc/self/comm && echo ready && while :; do sleep 1; done) & wait",
                ])
                .stdout(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap(),
        );
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(sh.0.stdout.as_mut().unwrap(), &mut ready).unwrap();
        let root = Pid::from_raw(sh.0.id() as i32);
        let named = |p: &Proc| std::fs::read(format!("/proc/{}/comm", p.pid)).is_ok_and(|c| c.starts_with(b"\xff) (x"));
        let found = below(root);
        let subshell = found.iter().find(|p| named(p)).copied();
        assert_eq!(subshell.map(|p| p.ppid), Some(root), "{found:?}");
        signal_below(root, Signal::SIGKILL, |_| true);
        sh.0.wait().unwrap();
        assert!(below(root).is_empty());
    }

    /// A child hangs below the thread that started it, and below another
    /// thread of its parent once that one ends: found either way. The test
    /// process's other children (other tests') may be there too.
    #[test]
    fn finds_a_child_that_another_thread_started_before_and_after_that_thread_ends() {
        struct Killed(std::process::Child);
        impl Drop for Killed {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(Killed(Command::new("sleep").arg("30").spawn().unwrap())).unwrap();
            let _ = done_rx.recv();
        });
        let child = rx.recv().unwrap();
        let pid = Pid::from_raw(child.0.id() as i32);
        let me = nix::unistd::getpid();
        assert!(below(me).iter().any(|p| p.pid == pid && p.ppid == me), "below its thread");
        drop(done_tx);
        thread.join().unwrap();
        assert!(below(me).iter().any(|p| p.pid == pid && p.ppid == me), "taken in by another thread");
        assert!(scan(me).iter().any(|p| p.pid == pid), "the scan agrees");
    }

    /// A process that moves up while the tree is read is found where it
    /// went: root -> P -> X, and P dies between the reads of the root's
    /// children and of its own, so that X is in neither as they were read.
    /// The kernel cannot be made to do that on cue, so the reads are
    /// scripted here; `daemons::sigterm_stops_the_daemons_within_grace_before_neli_run_exits`
    /// met it on a real tree about one run in three before the second pass.
    #[test]
    fn a_process_that_moves_up_while_the_tree_is_read_is_found() {
        let pid = Pid::from_raw;
        let (root, p, x) = (pid(10), pid(11), pid(12));
        let mut roots_read = 0;
        let children = |parent: Pid| match parent {
            _ if parent == root => {
                roots_read += 1;
                if roots_read == 1 {
                    vec![p]
                } else {
                    vec![x]
                }
            }
            _ => Vec::new(),
        };
        let stat = |at: Pid| Some(Proc { pid: at, ppid: root, pgrp: at });
        let found: Vec<Pid> = read_down(root, children, stat).iter().map(|q| q.pid).collect();
        assert_eq!(found, [p, x]);
    }

    /// Read down from the root or from every process, a tree that stands
    /// still is the same tree, parents first.
    #[test]
    fn reading_down_and_reading_every_process_find_the_same_tree() {
        if !children_listed() {
            eprintln!("this kernel lists no children in /proc (CONFIG_PROC_CHILDREN): the scan alone runs here");
            return;
        }
        // sh -> (sh -> sleep, setsid sleep) and sh -> sleep.
        let mut sh = Command::new("sh")
            .args(["-c", "sh -c 'sleep 30 & setsid sleep 30 & wait' & sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let root = Pid::from_raw(sh.id() as i32);
        let sorted = |mut procs: Vec<Proc>| {
            procs.sort_by_key(|p| p.pid);
            procs
        };
        // Settled: all four started, and the setsid'd one in a group of its
        // own (setsid runs after its fork: read before, its group is still
        // the parent's, and the two reads may straddle the change).
        let settled = |procs: &[Proc]| procs.len() == 4 && procs.iter().any(|p| p.pgrp == p.pid);
        for _ in 0..500 {
            if settled(&scan(root)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = down(root);
        assert_eq!(found.len(), 4, "{found:?}");
        for (i, p) in found.iter().enumerate() {
            assert!(p.ppid == root || found[..i].iter().any(|q| q.pid == p.ppid), "parents first: {found:?}");
        }
        assert_eq!(sorted(found), sorted(scan(root)));
        assert_eq!(signal_below(root, Signal::SIGKILL, |_| true), 4);
        let _ = nix::sys::signal::killpg(root, Signal::SIGKILL);
        sh.wait().unwrap();
    }

    #[test]
    fn spares_the_subtrees_it_is_told_to() {
        // sh -> (sh -> sleep), the spared subtree, and sh -> sleep.
        let mut sh = Command::new("sh")
            .args(["-c", "sh -c 'sleep 30; :' & echo $!; sleep 30 & wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(sh.stdout.take().unwrap()), &mut line).unwrap();
        let spared = Pid::from_raw(line.trim().parse().unwrap());
        let root = Pid::from_raw(sh.id() as i32);
        for _ in 0..500 {
            if below(root).len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(below(root).len(), 3, "{:?}", below(root));
        let condemned = outside(below(root), |pid| pid == spared);
        assert_eq!(condemned.len(), 1, "{condemned:?}");
        signal(&condemned, root, Signal::SIGKILL);
        for _ in 0..500 {
            if below(root).len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let left = below(root);
        assert!(left.len() == 2 && left.iter().any(|p| p.pid == spared), "the spared pair alone: {left:?}");
        assert_eq!(signal_below(root, Signal::SIGKILL, |_| true), 2);
        sh.wait().unwrap();
    }
}
