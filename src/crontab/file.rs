//! A crontab's file, read as cron reads /etc/cron.d (cronie's `BAD FILE
//! MODE`, `WRONG FILE OWNER`): its lines run as neli-run's user (root under
//! the shipped unit), so whoever can write it can run anything as that
//! user. A file writable by group or others, or owned by anyone but that
//! user or root, is refused whole; so is what is not a regular file (a
//! FIFO would block the read for good) and a file over `MAX_SIZE` (a link
//! to /dev/zero would eat the host's memory). One reading for a member, at
//! start and on each reload, and for `cron check`: they refuse alike.

use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::{parse, Crontab};
use crate::calendar::Zone;

/// The most a crontab holds: 1 MiB is some 15,000 job lines, past what a
/// fleet can run (`--roles`' cap is 1,024 partitions).
const MAX_SIZE: u64 = 1024 * 1024;

/// The crontab `file` read (`zone` for lines with no CRON_TZ above them):
/// Err, naming the file, why and the fix, when the file is refused whole.
pub fn read(file: &Path, zone: Zone) -> Result<Crontab, String> {
    let text = read_text(file)?;
    Ok(Crontab { digest: digest(&text), ..parse(&text, zone) })
}

/// A short digest of a crontab's text (FNV-1a, 64 bits, in hex): each
/// member says its own in its records, so that members running different
/// files are told and `status` names them (a comment changed counts: the
/// remedy is one file on every member). `cron check` prints it. Not a
/// defence against anyone: a topic writer can say any digest.
pub fn digest(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// What a member says of a crontab with no job, which it refuses: `cron
/// check` fails it too.
pub fn no_job(file: &Path) -> String {
    let shown = file.display();
    format!("{shown}: no job to run (`neli-run cron check {shown}` says what each line is)")
}

/// The file's text, if it is a regular file that only neli-run's user (or
/// root) can write, of at most `MAX_SIZE` bytes, in UTF-8.
fn read_text(file: &Path) -> Result<String, String> {
    let shown = file.display();
    let io = |e: std::io::Error| format!("{shown}: cannot read it: {e}");
    // Looked at before it is opened (opening a device can do things), and
    // again once open, where it cannot be swapped: what is read is what
    // was checked.
    regular(file, &std::fs::metadata(file).map_err(io)?)?;
    let opened: File =
        OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(file).map_err(io)?;
    let meta = opened.metadata().map_err(io)?;
    regular(file, &meta)?;
    trusted(file, &meta)?;
    if meta.len() > MAX_SIZE {
        return Err(too_big(file, meta.len()));
    }
    let bytes = crate::files::read_at_most(opened, MAX_SIZE).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => too_big(file, MAX_SIZE + 1),
        _ => io(e),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        format!("{shown}: not UTF-8 text (byte {at} is not): a crontab is text, is it the right file?")
    })
}

fn too_big(file: &Path, size: u64) -> String {
    format!(
        "{}: {size} bytes, over the {MAX_SIZE} bytes (1 MiB) a crontab may hold: is it the right file?",
        file.display()
    )
}

/// Err unless `meta` is a regular file's.
fn regular(file: &Path, meta: &Metadata) -> Result<(), String> {
    let kind = meta.file_type();
    let what = match () {
        _ if kind.is_file() => return Ok(()),
        _ if kind.is_dir() => "a directory",
        _ if kind.is_fifo() => "a FIFO",
        _ if kind.is_socket() => "a socket",
        _ if kind.is_char_device() => "a character device",
        _ if kind.is_block_device() => "a block device",
        _ => "not a file",
    };
    Err(format!("{}: {what}, not a regular file: a crontab is a regular file (or a link to one)", file.display()))
}

/// Err (with the `chmod` or `chown` that fixes it) unless only neli-run's
/// user, or root, can write the file: cron's rule for /etc/cron.d, where a
/// user's own crontab may be root's too.
fn trusted(file: &Path, meta: &Metadata) -> Result<(), String> {
    let shown = file.display();
    let me = nix::unistd::geteuid();
    let name =
        |uid: u32| nix::unistd::User::from_uid(uid.into()).ok().flatten().map_or_else(|| uid.to_string(), |u| u.name);
    let user = name(me.as_raw());
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "{shown}: refused: its mode is {mode:04o}, writable by group or others, who could run any command as \
             {user} through it (cron refuses such a file too): chmod go-w {shown}"
        ));
    }
    let owner = meta.uid();
    if owner != me.as_raw() && owner != 0 {
        let owners = if me.is_root() { "root".to_string() } else { format!("{user} (who runs it) or root") };
        return Err(format!(
            "{shown}: refused: owned by {}, who could run any command as {user} through it; a crontab is owned by \
             {owners} (cron refuses such a file too): chown {user} {shown}",
            name(owner)
        ));
    }
    Ok(())
}
