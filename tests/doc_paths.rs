//! No file of the repository names a file that does not exist: every path
//! ending in `.rs`, `.md`, `.sh`, `.py` or `.toml` in its sources, scripts
//! and documents resolves to a file of the repository (from the root, from
//! the naming file's folder, under `src/`, `tests/`, `benches/` or
//! `loom-tests/`, a bare file name anywhere, or a path that ends a file's
//! path), or is one of the files outside it that [`EXTERNAL`] lists. A
//! renamed or deleted file leaves no comment, doc or script pointing at it.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Files named on purpose that are not in the repository, and why.
const EXTERNAL: &[&str] = &[
    // The architecture, its style guide and its research notes, beside the
    // repository.
    "DESIGN.md",
    "STYLE.md",
    "research/io-driver.md",
    // tokio's sources, cited where a design follows them.
    "multi_thread/idle.rs",
    "runtime/context.rs",
    "benches/rt_multi_threaded.rs",
    // Written by scripts/bench-all.sh.
    "out/light_load.md",
    "out/load_counters.md",
    // A shell variable's expansion in scripts/mutate.sh.
    "ROOT/loom-tests/README.md",
    // A user's file in an example of the long-poll report (README).
    "src/server.rs",
];

const EXTS: &[&str] = &[".rs", ".md", ".sh", ".py", ".toml"];

/// Every file under `dir` (relative to `root`), skipping build outputs and
/// hidden folders (git's own).
fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("a readable folder") {
        let p = e.expect("a directory entry").path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(root, &p, out);
            }
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// The file paths `text` names: maximal runs of `[A-Za-z0-9_/-]` followed
/// by one of [`EXTS`] and not by another word character, and not preceded
/// by a `.` (a URL's host, `../`) or a word character.
fn named(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    let mut out = Vec::new();
    for ext in EXTS {
        let mut from = 0;
        while let Some(i) = text[from..].find(ext) {
            let at = from + i;
            from = at + ext.len();
            let end = at + ext.len();
            if end < b.len() && (word(b[end]) || b[end] == b'/') {
                continue;
            }
            let mut start = at;
            while start > 0 && (word(b[start - 1]) || b[start - 1] == b'/') {
                start -= 1;
            }
            if start == at || (start > 0 && b[start - 1] == b'.') || b[start] == b'/' {
                continue;
            }
            out.push(text[start..end].to_owned());
        }
    }
    out
}

#[test]
fn no_file_names_a_file_that_does_not_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(root, root, &mut files);
    let all: BTreeSet<String> = files
        .iter()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    let bases: BTreeSet<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    let resolves = |from: &Path, p: &str| {
        let dir = from.parent().map(|d| d.to_string_lossy().to_string());
        let mut cands = vec![p.to_owned()];
        if let Some(d) = dir.filter(|d| !d.is_empty()) {
            cands.push(format!("{d}/{p}"));
        }
        for pre in ["src/", "tests/", "benches/", "loom-tests/"] {
            cands.push(format!("{pre}{p}"));
        }
        cands.iter().any(|c| all.contains(c))
            || (!p.contains('/') && bases.contains(p))
            || all.iter().any(|f| f.ends_with(&format!("/{p}")))
            || EXTERNAL.contains(&p)
    };
    let mut missing = Vec::new();
    for f in &files {
        let name = f.to_string_lossy();
        // Vendored sources are upstream's; this file names examples.
        if !EXTS.iter().any(|e| name.ends_with(e))
            || name.starts_with("vendor/")
            || name == "tests/doc_paths.rs"
        {
            continue;
        }
        let Ok(text) = fs::read_to_string(root.join(f)) else {
            continue;
        };
        for p in named(&text) {
            if !resolves(f, &p) {
                missing.push(format!("{name}: {p}"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "files named that do not exist (rename the reference, or list an \
         outside file in EXTERNAL with its reason):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_scanner_finds_paths_and_skips_urls_relative_paths_and_longer_names() {
    let t = "see src/time/ops.rs, `worker.rs` and ../x.md; https://a.rs/b.md; foo.rsx; a.md/b";
    assert_eq!(
        named(t),
        ["src/time/ops.rs", "worker.rs"].map(String::from).to_vec()
    );
}

/// The protocols' document, cited by section ("src/sched/README.md, \"The
/// wake protocol\"") from module docs, comments and loom models.
const PROTOCOLS: &str = "src/sched/README.md";

/// The section titles cited right after each mention of [`PROTOCOLS`] in
/// `text`: `PROTOCOLS`, an optional closing backtick, `, "Title"`, with the
/// title's line breaks and comment markers collapsed to one space.
fn cited_sections(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(PROTOCOLS) {
        let rest = &text[at + PROTOCOLS.len()..];
        let rest = rest.strip_prefix('`').unwrap_or(rest);
        let Some(rest) = rest
            .strip_prefix(", \"")
            .or_else(|| rest.strip_prefix(",\n"))
        else {
            continue;
        };
        let rest = rest
            .trim_start_matches([' ', '/', '!'])
            .trim_start_matches('"');
        let Some(end) = rest.find('"') else { continue };
        let title = rest[..end]
            .split_whitespace()
            .filter(|w| !["//!", "///", "//"].contains(w))
            .collect::<Vec<_>>()
            .join(" ");
        out.push(title);
    }
    out
}

#[test]
fn every_cited_protocol_section_is_a_heading_of_the_protocols_document() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join(PROTOCOLS)).expect("the protocols' document");
    let headings: BTreeSet<&str> = doc
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect();
    let mut files = Vec::new();
    walk(root, root, &mut files);
    let mut missing = Vec::new();
    for f in &files {
        let name = f.to_string_lossy();
        if !EXTS.iter().any(|e| name.ends_with(e))
            || name.starts_with("vendor/")
            || name == "tests/doc_paths.rs"
        {
            continue;
        }
        let Ok(text) = fs::read_to_string(root.join(f)) else {
            continue;
        };
        for t in cited_sections(&text) {
            if !headings.contains(t.as_str()) {
                missing.push(format!("{name}: \"{t}\""));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "sections of {PROTOCOLS} cited that are not among its headings:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_section_scanner_reads_titles_across_comment_lines() {
    let t = "see src/sched/README.md, \"The wake\n    /// protocol\"; `src/sched/README.md`, \"Shutdown\"; src/sched/README.md.";
    assert_eq!(cited_sections(t), ["The wake protocol", "Shutdown"]);
}
