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
    let shim = build_shim(&root);
    println!("cargo:rustc-env=NELI_SHIM_PROGRAM={}", shim.display());
}

/// Builds shim/ (the program each command runs under, which neli-run
/// carries inside it: src/child/program.rs) with its own profile and
/// returns its path. Static, so that it maps nothing but itself: for musl
/// where that Rust target is installed (about 450 KiB), else with glibc's
/// libc.a (1.2 MiB), else (no libc.a: glibc-static, libc6-dev) linked to
/// libc.so, said as a warning. A cargo of its own, in a target directory of
/// its own under OUT_DIR: a build script cannot depend on a binary of its
/// workspace (cargo's artifact dependencies are unstable).
fn build_shim(root: &Path) -> PathBuf {
    for file in [
        "src/exit.rs",
        "src/stderr.rs",
        "src/child/shim.rs",
        "src/child/keeper.rs",
        "src/child/output.rs",
        "src/child/tree.rs",
    ] {
        println!("cargo:rerun-if-changed={file}");
    }
    for file in ["shim/src", "shim/Cargo.toml", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={file}");
    }
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name}"));
    let (target, out) = (var("TARGET"), PathBuf::from(var("OUT_DIR")).join("shim"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let musl = target.replace("-linux-gnu", "-linux-musl");
    let musl_installed = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--print", "target-libdir", "--target", &musl])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|dir| Path::new(dir.trim()).is_dir());
    let mut tries = vec![(target.as_str(), "-Ctarget-feature=+crt-static"), (target.as_str(), "")];
    if musl_installed {
        tries.insert(0, (musl.as_str(), ""));
    }
    for (i, (triple, flags)) in tries.iter().enumerate() {
        let built = Command::new(&cargo)
            .current_dir(root)
            .args(["build", "--quiet", "-p", "neli-shim", "--bin", "neli-shim", "--profile", "shim", "--target"])
            .arg(triple)
            .arg("--target-dir")
            .arg(&out)
            .env("CARGO_ENCODED_RUSTFLAGS", flags)
            // Not clippy's driver (under `cargo clippy`): shim/ is a member
            // of the workspace, which clippy checks as such.
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .status()
            .is_ok_and(|status| status.success());
        if built {
            if i + 1 == tries.len() {
                println!("cargo:warning=the shim is linked to libc.so: no libc.a here (glibc-static, libc6-dev)");
            }
            return out.join(triple).join("shim").join("neli-shim");
        }
    }
    panic!("building shim/ (the shim carried inside neli-run) failed: see cargo's output above");
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
