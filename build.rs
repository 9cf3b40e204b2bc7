//! Names the commit this binary is built from, for `neli-run --version`
//! (NELI_BUILD_COMMIT at compile time), and the target triple (NELI_BUILD_TARGET).
//!
//! In order: $NELI_BUILD_COMMIT if set (a packager building from a tarball
//! can pass it), `git rev-parse` when this crate is the root of a git work
//! tree, the sha1 in `.cargo_vcs_info.json` (the crate's own tarball, as
//! `cargo package` writes it), and else "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-env-changed=NELI_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = std::env::var("NELI_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| from_git(&root))
        .or_else(|| from_cargo_vcs_info(&root))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=NELI_BUILD_COMMIT={}", commit.trim());
    println!("cargo:rustc-env=NELI_BUILD_TARGET={}", std::env::var("TARGET").unwrap_or_default());
}

/// `git -C root ARGS`'s output, trimmed, if it succeeded.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// The short commit, when `root` is the top of a git work tree (not a
/// tarball unpacked inside some other repository).
fn from_git(root: &Path) -> Option<String> {
    let top = git(root, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(root).ok()? {
        return None;
    }
    let commit = git(root, &["rev-parse", "--short=10", "HEAD"])?;
    // Build again when HEAD moves: HEAD itself (a checkout), the branch it
    // points at (a commit), packed refs. Only files that exist: cargo
    // reruns a build script whose watched file is missing every time.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(root, &["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    Some(commit)
}

/// The first 10 digits of `"sha1": "..."` in the crate tarball's `.cargo_vcs_info.json`.
fn from_cargo_vcs_info(root: &Path) -> Option<String> {
    let info = std::fs::read_to_string(root.join(".cargo_vcs_info.json")).ok()?;
    let after = &info[info.find("\"sha1\"")? + "\"sha1\"".len()..];
    let value = after.split('"').nth(1)?;
    (value.len() >= 10 && value.chars().all(|c| c.is_ascii_hexdigit())).then(|| value[..10].to_string())
}
