//! `neli-shim __shim ...` and `neli-shim __keeper ...`: neli-run's shim
//! (src/child/shim.rs) and keeper (src/child/keeper.rs), and nothing else.
//!
//! The same files as in neli-run, compiled into a program that links only
//! libc, statically: what a shim costs while its command runs is what this
//! program maps, not neli-run's Kafka client, its TLS and SASL libraries
//! and their relocations. neli-run still answers `__shim` and `__keeper`
//! itself, where the kernel refuses to run a program from memory.

// These files also hold what neli-run uses of them and the shim does not.
#![allow(dead_code)]

#[path = "../../src/exit.rs"]
mod exit;
#[path = "../../src/stderr.rs"]
mod stderr;

#[path = "../../src/child"]
mod child {
    pub mod keeper;
    pub mod output;
    pub mod shim;
    pub mod tree;
}

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match argv.get(1).and_then(|a| a.to_str()) {
        Some(child::shim::ARG) => child::shim::main(&argv[2..]),
        Some(child::keeper::ARG) => child::keeper::main(&argv[2..]),
        _ => {
            stderr::line(format_args!("neli-shim: started by neli-run only (neli-run --help)"));
            std::process::exit(exit::Kind::Usage.code().into())
        }
    }
}
