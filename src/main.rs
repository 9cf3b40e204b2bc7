//! The `neli-run` binary; its body is the library's `main`.

fn main() -> std::process::ExitCode {
    neli_run::main()
}
