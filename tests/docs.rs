//! The man pages and shell completions are generated from the clap
//! definition; this test fails when the committed files are stale. Run with
//! NELI_BLESS=1 to regenerate them. Each subcommand has a page of its own
//! (neli-run-status.1 ...), and every page has EXIT STATUS and ENVIRONMENT
//! sections: the exit statuses from src/exit.rs's one table, which the
//! README's table is checked against (and rewritten from with NELI_BLESS=1),
//! the environment written here; `--help` ends with the same list, and no
//! other help text (a flag's, a description) states an exit status by hand.
//! The Markdown docs are checked too: every relative link leads to a file
//! and heading that exist.

use std::path::Path;

use clap::CommandFactory;
use neli_run::for_tests::{meanings, Cli, Status, STATUSES};
use roff::{bold, roman, Roff};

fn check(path: &Path, fresh: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("NELI_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, fresh).unwrap();
    } else if std::fs::read(path).ok().as_deref() != Some(fresh) {
        stale.push(path.display().to_string());
    }
}

/// What the command's environment holds and what neli-run reads.
const RUN_ENVIRONMENT: &[(&str, &str)] = &[
    ("NELI_*", "Each option's variable, as listed with it above: the option's value when the flag is not given."),
    (
        "NELI_KAFKA_PROPERTIES",
        "librdkafka properties as a ';'-separated list (\\; for a ';' in a value, \\\\ for a backslash); -X wins. \
         Not UTF-8: refused (exit 2), naming the entry.",
    ),
    ("RUST_LOG", "Log filter (tracing's EnvFilter syntax); overrides -v and -q."),
    ("NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID", "systemd's notify protocol and watchdog (Type=notify)."),
    (
        "The command receives",
        "NELI_GROUP, NELI_TOPIC, NELI_NAME, NELI_BROKERS and NELI_FENCING_TOKEN; NELI_ATTEMPT and NELI_WAVE for a \
         wave's run (cron, --once-within); NELI_ATTEMPT and NELI_DUE for a scheduled run (--every, --cron). What \
         neli-run sets wins, and every variable of neli-run's (those it sets for some run, as NELI_ROLE, NELI_JOB \
         or NELI_TOKEN_FILE, the options', NELI_KAFKA_PROPERTIES, systemd's) is removed from the environment it \
         was given; others pass.",
    ),
];

const READER_ENVIRONMENT: &[(&str, &str)] = &[
    ("NELI_*", "Each option's variable, as listed with it above."),
    ("NELI_KAFKA_PROPERTIES", "librdkafka properties as a ';'-separated list; -X wins."),
    ("RUST_LOG", "Log filter; overrides -v and -q."),
];

/// One page's EXIT STATUS items, from the one table in src/exit.rs
/// (backquotes are Markdown's, for the README: roff has none).
fn exit_items(meaning: fn(&Status) -> Option<&'static str>) -> Vec<(String, String)> {
    STATUSES.iter().filter_map(|s| meaning(s).map(|m| (s.code.label(), m.replace('`', "")))).collect()
}

fn section<T: AsRef<str>, U: AsRef<str>>(roff: &mut Roff, title: &str, items: &[(T, U)]) {
    roff.control("SH", [title]);
    for (term, text) in items {
        roff.control("TP", []).text([bold(term.as_ref())]).text([roman(text.as_ref())]);
    }
}

/// A page: clap_mangen's sections, then ours, then the version.
fn page(cmd: &clap::Command, exit: &[(String, String)], environment: &[(&str, &str)]) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    man.render_synopsis_section(&mut out).unwrap();
    man.render_description_section(&mut out).unwrap();
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out).unwrap();
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out).unwrap();
    }
    let mut roff = Roff::new();
    section(&mut roff, "EXIT STATUS", exit);
    section(&mut roff, "ENVIRONMENT", environment);
    roff.to_writer(&mut out).unwrap();
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        man.render_extra_section(&mut out).unwrap();
    }
    if cmd.get_version().is_some() || cmd.get_long_version().is_some() {
        man.render_version_section(&mut out).unwrap();
    }
    out
}

#[test]
fn man_pages_and_completions_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();

    // No `help` subcommand page: `neli-run help X` is `neli-run X --help`.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    check(&root.join("man/neli-run.1"), &page(&cmd, &exit_items(meanings("")), RUN_ENVIRONMENT), &mut stale);
    let mut pages = vec!["neli-run.1".to_string()];
    // Every subcommand has a page, a subcommand's subcommands too
    // (`dev-broker event`), since its parent's page cites it.
    for (name, sub) in subcommands(&cmd) {
        let exit = exit_items(meanings(&name));
        assert!(!exit.is_empty(), "no EXIT STATUS for the subcommand {name}: give it a column in exit::meanings");
        let file = format!("{}.1", sub.get_display_name().expect("built: neli-run-NAME"));
        check(&root.join("man").join(&file), &page(sub, &exit, READER_ENVIRONMENT), &mut stale);
        pages.push(file);
    }
    // The main page cites every subcommand's page.
    let main = String::from_utf8(std::fs::read(root.join("man/neli-run.1")).unwrap()).unwrap();
    for sub in cmd.get_subcommands() {
        let cited = format!("{}-{}(1)", cmd.get_name(), sub.get_name()).replace('-', "\\-");
        assert!(main.contains(&cited), "neli-run.1 cites {cited}");
    }
    // No page is left over, and every page cited exists.
    for entry in std::fs::read_dir(root.join("man")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(pages.contains(&name), "man/{name} is not generated: remove it");
        let text = String::from_utf8(std::fs::read(entry.path()).unwrap()).unwrap();
        for cited in cited_pages(&text).into_iter().filter(|c| c.starts_with("neli-run")) {
            let page = format!("{cited}.1");
            assert!(root.join("man").join(&page).exists(), "man/{name} cites {cited}(1): man/{page} does not exist");
        }
    }

    use clap_complete::Shell;
    for (shell, file) in [(Shell::Bash, "neli-run.bash"), (Shell::Zsh, "_neli-run"), (Shell::Fish, "neli-run.fish")] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "neli-run", &mut out);
        check(&root.join("completions").join(file), &out, &mut stale);
    }
    assert!(stale.is_empty(), "stale generated files {stale:?}: run NELI_BLESS=1 cargo test --test tests docs");
}

/// Every subcommand, a subcommand's subcommands too (`dev-broker event`),
/// named as `exit::meanings` takes them.
fn subcommands(cmd: &clap::Command) -> Vec<(String, &clap::Command)> {
    let subs = cmd.get_subcommands().flat_map(|sub| {
        let nested = sub.get_subcommands().filter(|s| s.get_name() != "help");
        std::iter::once((sub.get_name().to_string(), sub))
            .chain(nested.map(move |n| (format!("{} {}", sub.get_name(), n.get_name()), n)))
    });
    subs.collect()
}

/// Where a text states an exit status of neli-run's own: "exit 75",
/// "exits with 2", "ends it quietly with 0", or a sentence that opens
/// "Exits 0" (its subject left out: neli-run). What another program exits
/// with ("CMD exits 0") and what a run exited with are not that.
fn stated_exits(text: &str) -> Vec<String> {
    let own: Vec<String> = STATUSES.iter().map(|s| s.code.label()).filter(|l| l.parse::<u8>().is_ok()).collect();
    let words: Vec<&str> = text.split_whitespace().collect();
    let bare = |w: &str| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let verb = bare(word);
        let opens = verb.starts_with(char::is_uppercase);
        let verb = verb.to_lowercase();
        if !["exit", "exits", "ends"].contains(&verb.as_str()) {
            continue;
        }
        let filler = ["with", "status", "code", "it", "quietly"];
        let Some(n) = words[i + 1..].iter().take(4).map(|w| bare(w)).find(|w| !filler.contains(&w.as_str())) else {
            continue;
        };
        let any = opens || verb == "ends";
        if own.contains(&n) && (n != "0" || any) {
            found.push(words[i.saturating_sub(4)..(i + 5).min(words.len())].join(" "));
        }
    }
    found
}

#[test]
fn stated_exits_are_found_and_other_programs_exits_are_not() {
    for said in ["Give up (exit 75) if not leader.", "Exits 0 on SIGTERM.", "A closed stdout ends it quietly with 0."] {
        assert_eq!(stated_exits(said).len(), 1, "{said}");
    }
    for other in ["Lead only while CMD exits 0.", "unless it exited with status 0", "--once-within 0", "exit 143"] {
        assert_eq!(stated_exits(other), Vec::<String>::new(), "{other}");
    }
}

/// Each page states its exit statuses once, completely, from `STATUSES`:
/// `--help` (as `neli-run` builds it at run time) ends with every status the
/// command can end with and its meaning, as the man page's EXIT STATUS
/// lists them; neither its description nor a flag's help, on the page or
/// in the man page, states one by hand.
#[test]
fn help_states_each_exit_status_once_from_statuses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let names = std::iter::once(String::new()).chain(subcommands(&cmd).into_iter().map(|(name, _)| name));
    for name in names {
        let items = exit_items(meanings(&name));
        assert!(!items.is_empty(), "{name:?}: no exit statuses in exit::STATUSES");
        let expected: String = items.iter().map(|(label, meaning)| format!("{label} {meaning}\n")).collect();
        let man =
            if name.is_empty() { "neli-run.1".to_string() } else { format!("neli-run-{}.1", name.replace(' ', "-")) };
        let man = std::fs::read_to_string(root.join("man").join(&man)).unwrap().replace("\\-", "-");
        let (man_text, _) = man.split_once(".SH \"EXIT STATUS\"").expect("every man page has EXIT STATUS");
        assert_eq!(stated_exits(man_text), Vec::<String>::new(), "man page of {name:?}: say it in exit::STATUSES");
        for flag in ["--help", "-h"] {
            let argv: Vec<std::ffi::OsString> =
                ["neli-run"].into_iter().chain(name.split_whitespace()).chain([flag]).map(Into::into).collect();
            let help = Cli::parse_argv(&argv).expect_err("help is an early exit").to_string();
            let (text, listed) =
                help.split_once("\nExit status:\n").unwrap_or_else(|| panic!("{name:?} {flag}: {help}"));
            let words = |text: &str| text.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            assert_eq!(words(listed), words(&expected), "{name:?} {flag}: not exit::STATUSES's list\n{help}");
            assert_eq!(stated_exits(text), Vec::<String>::new(), "{name:?} {flag}: say it in exit::STATUSES\n{help}");
        }
    }
}

/// The pages a man page cites, `name(1)`, with roff's `\-` read as `-`.
fn cited_pages(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("(1)") {
        let name: String = rest[..i].chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        out.push(name.chars().rev().collect());
        rest = &rest[i + 3..];
    }
    out
}

#[test]
fn cited_pages_are_read_from_roff() {
    assert_eq!(cited_pages("a\n.TP\nneli\\-run\\-x(1)\nsee tail(1)."), ["neli-run-x", "tail"]);
}

/// The README's exit table: the one in src/exit.rs, as Markdown.
fn readme_exit_table() -> String {
    let cell = |m: Option<&str>| m.unwrap_or("").replace('|', "\\|");
    let mut table =
        String::from("| status | `neli-run -- COMMAND` | `status` | `yield` | `pause`, `resume` | `dev-broker` |\n|---|---|---|---|---|---|\n");
    for s in STATUSES {
        table += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            s.code.label(),
            cell(s.run),
            cell(s.status),
            cell(s.yield_),
            cell(s.pause),
            cell(s.dev_broker)
        );
    }
    table
}

/// The line the README's exit table follows.
const EXIT_TABLE_MARK: &str =
    "<!-- exit statuses: src/exit.rs's table, checked by tests/docs.rs (NELI_BLESS=1 rewrites it) -->";

#[test]
fn the_readme_exit_table_is_src_exit_rs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let mark = lines.iter().position(|l| l.trim() == EXIT_TABLE_MARK).expect("README.md has the exit table's mark");
    let end = (mark + 1..lines.len()).find(|&i| !lines[i].starts_with('|')).unwrap_or(lines.len());
    let found: String = lines[mark + 1..end].iter().map(|l| format!("{l}\n")).collect();
    let fresh = readme_exit_table();
    if found == fresh {
        return;
    }
    if std::env::var_os("NELI_BLESS").is_some() {
        let mut out: String = lines[..=mark].iter().map(|l| format!("{l}\n")).collect();
        out += &fresh;
        out += &lines[end..].iter().map(|l| format!("{l}\n")).collect::<String>();
        std::fs::write(&path, out).unwrap();
    } else {
        panic!("README.md's exit table is not src/exit.rs's: run NELI_BLESS=1 cargo test --test tests docs\n{fresh}");
    }
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens,
/// punctuation but `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of a Markdown file outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets -1, -2 ...).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else { continue };
        let base = slug(heading.trim_start_matches('#'));
        let n = seen
            .iter()
            .filter(|a| **a == base || a.strip_prefix(&format!("{base}-")).is_some_and(|r| r.parse::<u32>().is_ok()))
            .count();
        seen.push(if n == 0 { base } else { format!("{base}-{n}") });
    }
    seen
}

/// The targets of a line's inline links, `[text](target)`.
fn links(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find(')') {
            out.push(&rest[..j]);
            rest = &rest[j..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().flatten().map(|e| e.path()).collect();
    docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    docs.sort();
    files.extend(docs.iter().cloned());
    let mut broken = Vec::new();
    let mut linked = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in prose(&text).into_iter().flat_map(links) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dest = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            let Ok(dest) = dest.canonicalize() else {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            };
            if file.ends_with("README.md") {
                linked.push(dest.clone());
            }
            if !anchor.is_empty() && !anchors(&std::fs::read_to_string(&dest).unwrap()).iter().any(|a| a == anchor) {
                broken.push(format!("{}: {target}: no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    // Every page of the docs is one click from the README.
    for file in &files[1..] {
        assert!(linked.contains(&file.canonicalize().unwrap()), "README.md does not link {}", file.display());
    }
}

#[test]
fn the_readme_is_a_five_minute_read() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: move the detail to docs/ (300 at most)");
}
