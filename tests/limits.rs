//! The house's limits, checked by the build so that they hold without a
//! read: no source file of the workspace over 800 lines, and no import
//! cycle between the top-level modules of src/ (production code). The third
//! limit, no function over 120 lines, is clippy's `too_many_lines`
//! (clippy.toml, Cargo.toml's [workspace.lints]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a `.rs` file of the workspace may have.
const MAX_FILE_LINES: usize = 800;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, but in build output (`target`) and hidden
/// directories (`.git`).
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let (path, name) = (entry.path(), entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(root(), &mut files);
    assert!(files.len() > 100, "the walk found the workspace's files ({} of them)", files.len());
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            let name = path.strip_prefix(root()).unwrap().display();
            (lines > MAX_FILE_LINES).then(|| format!("{name}: {lines} lines"))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "over {MAX_FILE_LINES} lines:\n  {}\nSplit each along its themes: a file's inline tests into a tests.rs \
         beside it (or tests/ by theme), a module's parts into files of their own, an integration test file into \
         one per theme registered in tests/tests.rs.",
        over.join("\n  ")
    );
}

/// `text` with its comments and the insides of its string and character
/// literals blanked (newlines kept, so offsets and line numbers hold): what
/// is left is code, to scan for braces and paths.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i..].starts_with(b"//") {
            i = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, start, i);
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    (depth, i) = (depth + 1, i + 2);
                } else if b[i..].starts_with(b"*/") {
                    (depth, i) = (depth - 1, i + 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            blank(&mut out, start, i);
        } else if b[i] == b'r'
            && (!ident(i) || (b[i - 1] == b'b' && !ident(i - 1)))
            && raw_hashes(&b[i + 1..]).is_some()
        {
            let hashes = raw_hashes(&b[i + 1..]).unwrap();
            let end = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            i = text[body..].find(&end).map_or(b.len(), |n| body + n + end.len());
            blank(&mut out, body, i - end.len());
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, start + 1, i);
            i += 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}'), or a lifetime.
            let char_len = text[i + 1..].chars().next().map_or(0, char::len_utf8);
            if b.get(i + 1) == Some(&b'\\') {
                i = text[i + 2..].find('\'').map_or(b.len(), |n| i + 2 + n);
                blank(&mut out, start + 1, i);
            } else if b.get(i + 1 + char_len) == Some(&b'\'') {
                i += 1 + char_len;
                blank(&mut out, start + 1, i);
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How many `#` open a raw string at `b` (just after its `r`), if one does.
fn raw_hashes(b: &[u8]) -> Option<usize> {
    let hashes = b.iter().take_while(|&&c| c == b'#').count();
    (b.get(hashes) == Some(&b'"')).then_some(hashes)
}

/// Where the item that starts at `from` of `code` ends: past its block's
/// closing brace, or its `;` (brackets and parentheses nest), or at the
/// brace that closes what holds it (a field).
fn item_end(code: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in code.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return i,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    code.len()
}

/// A file's production code: `code` with its `#[cfg(test)]` items blanked,
/// and the modules it declares as `mod NAME;` (tests' own are left out).
fn production(mut code: String) -> (String, Vec<String>) {
    while let Some(at) = code.find("#[cfg(test)]") {
        let end = item_end(code.as_bytes(), at + "#[cfg(test)]".len());
        code.replace_range(at..end, &code[at..end].replace(|c| c != '\n', " "));
    }
    let mut children = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && (code.as_bytes()[at - 1].is_ascii_alphanumeric() || code.as_bytes()[at - 1] == b'_') {
            continue;
        }
        let rest = code[at + 4..].trim_start();
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if rest[name.len()..].trim_start().starts_with(';') {
            children.push(name);
        }
    }
    (code, children)
}

/// The top-level modules that `code` names by `crate::NAME` (in a path, or
/// in a group: `use crate::{a::x, b};`), each with the line of its first
/// mention.
fn crate_paths(code: &str) -> BTreeMap<String, usize> {
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let name_at =
        |at: usize| -> String { code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut named = BTreeMap::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let after = at + "crate::".len();
        if !code[after..].starts_with('{') {
            named.entry(name_at(after)).or_insert(line(at));
            continue;
        }
        // A group: the first name of each of its parts.
        let group = &code[after + 1..after + item_end(&code.as_bytes()[after..], 0) - 1];
        let mut depth = 0;
        let mut first = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => first = true,
                c if first && (c.is_alphanumeric() || c == '_') => {
                    first = false;
                    named.entry(name_at(after + 1 + i)).or_insert(line(at));
                }
                _ => {}
            }
        }
    }
    named
}

/// Where `module`'s file declares a child `name`: `dir/name.rs` or
/// `dir/name/mod.rs`, where `dir` holds the children of the declaring file.
fn child_file(dir: &Path, name: &str) -> PathBuf {
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

/// The directory of the children of the module whose file is `file`.
fn children_dir(file: &Path) -> PathBuf {
    match file.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    }
}

/// An edge of the import graph: the file and line of its first use.
type Uses = BTreeMap<String, BTreeMap<String, (PathBuf, usize)>>;

/// For each top-level module of src/, the other top-level modules its
/// production files name by `crate::`. A module's files are followed from
/// its root file (src/a.rs or src/a/mod.rs) through its `mod` declarations,
/// so a `#[cfg(test)] mod tests;` and everything under it is left out.
fn uses(src: &Path) -> Uses {
    let (_, top) = production(code_of(&std::fs::read_to_string(src.join("lib.rs")).unwrap()));
    let mut uses = Uses::new();
    for module in &top {
        let edges = uses.entry(module.clone()).or_default();
        let mut files = vec![child_file(src, module)];
        while let Some(file) = files.pop() {
            let (code, children) = production(code_of(&std::fs::read_to_string(&file).unwrap()));
            let dir = children_dir(&file);
            files.extend(children.iter().map(|child| child_file(&dir, child)));
            for (name, line) in crate_paths(&code) {
                if &name != module && top.contains(&name) {
                    let at = file.strip_prefix(src.parent().unwrap()).unwrap().to_path_buf();
                    edges.entry(name).or_insert((at, line));
                }
            }
        }
    }
    uses
}

/// The cycles of `uses`: for each module on one, the shortest way back to
/// itself, given once per set of modules it runs through.
fn cycles(uses: &Uses) -> Vec<Vec<String>> {
    let mut found: BTreeMap<BTreeSet<String>, Vec<String>> = BTreeMap::new();
    for start in uses.keys() {
        // Breadth first from `start`, remembering how each module was reached.
        let mut reached: BTreeMap<&String, &String> = BTreeMap::new();
        let mut next = vec![start];
        while !next.is_empty() && !reached.contains_key(start) {
            let mut after = Vec::new();
            for from in next {
                for to in uses.get(from).into_iter().flat_map(BTreeMap::keys) {
                    if !reached.contains_key(to) {
                        reached.insert(to, from);
                        after.push(to);
                    }
                }
            }
            next = after;
        }
        if reached.contains_key(start) {
            let mut cycle = vec![start.clone()];
            let mut at = reached[start];
            while at != start {
                cycle.push(at.clone());
                at = reached[at];
            }
            cycle.push(start.clone());
            cycle.reverse();
            found.entry(cycle.iter().cloned().collect()).or_insert(cycle);
        }
    }
    found.into_values().collect()
}

#[test]
fn no_import_cycle_between_the_top_level_modules_of_src() {
    let uses = uses(&root().join("src"));
    assert!(uses.len() > 10 && uses.values().any(|e| !e.is_empty()), "the scan found the modules and their uses");
    let shown: Vec<String> = cycles(&uses)
        .iter()
        .map(|cycle| {
            let steps = cycle.windows(2).map(|w| {
                let (file, line) = &uses[&w[0]][&w[1]];
                format!("\n    {} -> {} ({}:{line})", w[0], w[1], file.display())
            });
            format!("  {}:{}", cycle.join(" -> "), steps.collect::<String>())
        })
        .collect();
    assert!(
        shown.is_empty(),
        "import cycles between the top-level modules of src/ (production code, `crate::` paths):\n{}\nEnd each by \
         moving what one side uses into a module both can import (as src/printable.rs, src/files.rs) or by passing \
         it in as a value.",
        shown.join("\n")
    );
}

#[test]
fn the_scan_sees_production_paths_only() {
    let text = r##"
        use crate::{a::x, b, c::{d, e}};
        // crate::comment
        /* crate::block /* nested */ crate::block */
        const S: &str = "crate::string";
        const R: &str = r#"crate::raw "quoted""#;
        const C: char = '"';
        fn f<'a>(x: &'a str) -> crate::f::T { crate::g::h(); $crate::macro_path; }
        mod child;
        #[cfg(test)]
        mod tests;
        #[cfg(test)]
        mod inline { use crate::test_only; }
        #[cfg(test)]
        fn helper(x: [u8; 2]) { crate::test_only2(); }
        pub(crate) fn last() { crate::z::y(); }
    "##;
    let (code, children) = production(code_of(text));
    assert_eq!(children, ["child"]);
    let named: Vec<_> = crate_paths(&code).into_keys().collect();
    assert_eq!(named, ["a", "b", "c", "f", "g", "z"]);
    assert_eq!(crate_paths(&code)["f"], 8, "the line of the first mention");
}

#[test]
fn a_cycle_is_found_through_any_number_of_modules() {
    let at = || (PathBuf::from("src/x.rs"), 1);
    let graph = |edges: &[(&str, &str)]| {
        let mut uses = Uses::new();
        for (from, to) in edges {
            uses.entry(to.to_string()).or_default();
            uses.entry(from.to_string()).or_default().insert(to.to_string(), at());
        }
        uses
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    assert_eq!(cycles(&graph(&[("a", "b"), ("b", "a")])), [["a", "b", "a"]]);
    assert_eq!(cycles(&graph(&[("x", "a"), ("a", "b"), ("b", "c"), ("c", "a")])), [["a", "b", "c", "a"]]);
}
