//! The program a command's shim and a hook's keeper run as: shim/, a small
//! static program that neli-run carries inside it (build.rs builds it) and
//! starts from memory, so that neli-run stays one file to install and a
//! shim costs what it does (0.3 MiB resident built for musl, 1.1 with
//! glibc's libc.a) rather than what neli-run re-executed maps (its Kafka
//! client, TLS and SASL libraries, and their relocations: 8 MiB resident,
//! 3 MiB of it its own).
//!
//! The program is written once into a sealed memfd, and each shim is
//! started as `/proc/self/fd/N`, which the kernel opens before exec closes
//! N. Where the kernel refuses that (no memfd, `vm.memfd_noexec = 2`, a
//! policy that forbids executing it), shims run as neli-run itself
//! (`/proc/self/exe __shim`, which neli-run still answers): the same code,
//! at the old cost, said once in the log.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::unistd::{access, AccessFlags};

use super::shim::LEASE_FD;

/// The shim program, as build.rs built it.
static CARRIED: &[u8] = include_bytes!(env!("NELI_SHIM_PROGRAM"));

/// This binary, where the carried program cannot run.
const ITSELF: &str = "/proc/self/exe";

/// What to exec for a shim or a keeper (whose first argument says which).
pub(super) fn path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        carried().unwrap_or_else(|err| {
            tracing::warn!(%err, "cannot run the shim from memory: each command's shim runs as neli-run itself (about 7 MiB more each)");
            PathBuf::from(ITSELF)
        })
    })
}

/// Writes the carried program into a sealed memfd and returns the path it
/// runs as, once the kernel says it may be executed.
fn carried() -> io::Result<PathBuf> {
    let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    // MFD_EXEC (Linux 6.3): executable even where vm.memfd_noexec = 1 makes
    // a memfd not so by default; older kernels refuse the flag (EINVAL).
    let exec = MFdFlags::from_bits_retain(libc::MFD_EXEC as _);
    let memfd = memfd_create("neli-run-shim", flags | exec).or_else(|_| memfd_create("neli-run-shim", flags))?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(CARRIED)?;
    // Nothing can change it from here on, even through /proc/self/fd.
    let seals = SealFlag::F_SEAL_SEAL | SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_WRITE;
    fcntl(&file, FcntlArg::F_ADD_SEALS(seals))?;
    // A copy above LEASE_FD (a shim's start places its lease pipe there
    // before it execs this path), open for as long as neli-run runs.
    let fd = fcntl(&file, FcntlArg::F_DUPFD_CLOEXEC(LEASE_FD + 1))?;
    let path = PathBuf::from(format!("/proc/self/fd/{fd}"));
    access(&path, AccessFlags::X_OK)?;
    Ok(path)
}
