//! The man page and shell completions are generated from the clap
//! definition; this test fails when the committed files are stale. Run with
//! NELI_BLESS=1 to regenerate them.

use std::path::Path;

use clap::CommandFactory;
use neli_run::for_tests::Cli;

fn check(path: &Path, fresh: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("NELI_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, fresh).unwrap();
    } else if std::fs::read(path).ok().as_deref() != Some(fresh) {
        stale.push(path.display().to_string());
    }
}

#[test]
fn man_page_and_completions_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();

    let mut man = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut man).unwrap();
    check(&root.join("man/neli-run.1"), &man, &mut stale);

    use clap_complete::Shell;
    for (shell, file) in [(Shell::Bash, "neli-run.bash"), (Shell::Zsh, "_neli-run"), (Shell::Fish, "neli-run.fish")] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "neli-run", &mut out);
        check(&root.join("completions").join(file), &out, &mut stale);
    }
    assert!(stale.is_empty(), "stale generated files {stale:?}: run NELI_BLESS=1 cargo test --test tests docs");
}
