//! The modules of `src/` import one way (README, "Layout"): down the
//! layers, never up, and never in a circle. Three checks:
//!
//! - **layers**: [`LAYERS`] lists the layers top to bottom and the
//!   top-level modules of each (a folder is one module with everything
//!   under it); a module that imports a module of a higher layer fails the
//!   test, printed with the file-level imports behind the edge. A
//!   top-level module that no layer lists fails it too;
//! - **files**: no import cycle between files (each file is a module);
//! - **top-level modules**: no import cycle between top-level modules, so
//!   that the modules of one layer, which may import each other, still do
//!   not import each other in a circle through their folders
//!   (`worker/shared.rs` -> `io::driver` while `io::registration` ->
//!   `worker/shared.rs`).
//!
//! Each file is a module (a folder's `mod.rs` is the folder's module, its
//! other files its submodules). Module A depends on module B when A's code
//! outside its test module names a `crate::` path into B (the longest
//! module prefix of the path; an item re-exported by a folder's `mod.rs`
//! counts as that `mod.rs`). A parent and its own submodules do not count
//! as depending on each other.
//!
//! A test over the sources rather than `cargo-modules`' `dependencies
//! --acyclic`: nothing to install on the CI machine, it runs with the rest
//! of the suite in milliseconds, and its notion of a dependency (a
//! `crate::` path) is the one the layering rule speaks of.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module path (`worker`, `io::driver`) -> source (test module cut off).
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
    for e in fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("a directory entry").path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let mut pre = prefix.to_vec();
            pre.push(name);
            modules(&p, &pre, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut parts = prefix.to_vec();
            if !matches!(stem, "mod" | "lib" | "main") {
                parts.push(stem.to_owned());
            }
            let text = fs::read_to_string(&p).expect("a source file");
            out.insert(parts.join("::"), code(&text));
        }
    }
}

/// The code of a file: comments dropped, its test module (at its end) cut.
fn code(text: &str) -> String {
    let mut s = String::new();
    for line in text.lines() {
        let l = line.split("//").next().unwrap_or("");
        if l.trim_start().starts_with("#[cfg(test)]") || l.contains("#[cfg(all(test") {
            break;
        }
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// The `crate::a::b::c` paths named in `src` (identifiers only, `crate::{`
/// groups expanded one level).
fn crate_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `$crate::` or `hwsched_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(item.trim().chars().take_while(|&c| ident(c)).collect());
            }
            continue;
        }
        out.push(rest.chars().take_while(|&c| ident(c)).collect());
    }
    out
}

/// The module a path lands in: its longest prefix that is a module.
fn resolve<'a>(path: &str, mods: &'a BTreeMap<String, String>) -> Option<&'a str> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find_map(|k| mods.get_key_value(&k).map(|(k, _)| k.as_str()))
}

fn related(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        idx: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.idx.len();
        t.idx.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for &w in &t.edges[v] {
            if !t.idx.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.idx[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.idx[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        idx: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in edges.keys() {
        if !t.idx.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn edges_of(mods: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (m, src) in mods {
        let e = edges.entry(m.as_str()).or_default();
        for p in crate_paths(src) {
            if let Some(t) = resolve(&p, mods) {
                if !related(m, t) {
                    e.insert(t);
                }
            }
        }
    }
    edges
}

#[test]
fn no_import_cycle_between_the_modules_of_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeMap::new();
    modules(&src, &[], &mut mods);
    assert!(mods.len() > 20, "read {} modules from {src:?}", mods.len());
    let edges = edges_of(&mods);
    let found = cycles(&edges);
    let mut report = String::new();
    for c in &found {
        report += &format!("{} modules in a cycle: {}\n", c.len(), c.join(", "));
        for a in c {
            for b in &edges[a.as_str()] {
                if c.iter().any(|x| x == b) {
                    report += &format!("    {a} -> {b}\n");
                }
            }
        }
    }
    assert!(found.is_empty(), "import cycles in src/:\n{report}");
}

/// The edges between top-level modules: a folder and its files are one
/// module, named by the folder (`io::driver` -> `shared` counts as `io` ->
/// `shared`); what a folder's files import of each other is left out.
fn top_level_edges<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> BTreeMap<&'a str, BTreeSet<&'a str>> {
    let top = |m: &'a str| m.split("::").next().unwrap_or(m);
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (&a, bs) in edges {
        let e = out.entry(top(a)).or_default();
        for &b in bs {
            if top(b) != top(a) {
                e.insert(top(b));
            }
        }
    }
    out
}

/// The file-level edges behind one top-level edge `a -> b` (what to look at
/// to break it).
fn witnesses(edges: &BTreeMap<&str, BTreeSet<&str>>, a: &str, b: &str) -> Vec<String> {
    let under = |m: &str, t: &str| m == t || m.starts_with(&format!("{t}::"));
    let mut out = Vec::new();
    for (&x, ys) in edges {
        if under(x, a) {
            for &y in ys {
                if under(y, b) {
                    out.push(format!("{x} -> {y}"));
                }
            }
        }
    }
    out
}

/// The cycles between top-level modules, printed with the file-level
/// imports that make each edge; empty when there is none.
fn top_level_report(edges: &BTreeMap<&str, BTreeSet<&str>>) -> String {
    let top = top_level_edges(edges);
    let mut report = String::new();
    for c in cycles(&top) {
        report += &format!(
            "{} top-level modules in a cycle: {}\n",
            c.len(),
            c.join(", ")
        );
        for a in &c {
            for b in &top[a.as_str()] {
                if c.iter().any(|x| x == b) {
                    report += &format!("    {a} -> {b} ({})\n", witnesses(edges, a, b).join(", "));
                }
            }
        }
    }
    report
}

#[test]
fn no_import_cycle_between_the_top_level_modules_of_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeMap::new();
    modules(&src, &[], &mut mods);
    assert!(mods.len() > 20, "read {} modules from {src:?}", mods.len());
    let edges = edges_of(&mods);
    let report = top_level_report(&edges);
    assert!(
        report.is_empty(),
        "import cycles between the top-level modules of src/ (a folder counts as one \
         module):\n{report}"
    );
}

/// The layers of `src/`, top to bottom, and the top-level modules of each
/// (README, "Layout"). A module may import modules of its own layer (the
/// cycle checks still apply) and of the layers below it, never one above.
const LAYERS: &[(&str, &[&str])] = &[
    // The public API: building and entering a runtime, spawning, JoinSet;
    // the sockets and signals a task uses; the bridges to tokio and hyper;
    // per-task metrics.
    (
        "api",
        &[
            "runtime",
            "net",
            "signal",
            "hyper",
            "tokio_compat",
            "metrics",
        ],
    ),
    // The worker's loop, the state every worker shares (`Shared`) and where
    // a spawned or woken task goes.
    ("worker", &["worker"]),
    // Tasks and what runs beside them: the task cell and join handles, the
    // blocking pool, thread hooks, the trace recorder.
    ("task", &["task", "blocking", "config", "trace"]),
    // The driver: timers over the I/O driver.
    ("driver", &["time", "io"]),
    // The protocols the loom models check, generic over views.
    ("sched", &["sched"]),
    // Pure decisions: placement, the idle walk, search orders, load
    // classification, the idle governor.
    ("policy", &["policy"]),
    // The machine: hwloc topology, and the places a task can be put on it.
    ("topology", &["topology", "place"]),
    // Leaves every layer may use: the thread-local context, counters,
    // clocks, tunables, errors, the loom shim.
    (
        "leaf",
        &["context", "stats", "timing", "tunables", "error", "sync"],
    ),
];

/// The imports that run up the layers, and the top-level modules that no
/// layer lists (the crate root, `lib.rs`, is above every layer); empty when
/// there are none.
fn layer_report(edges: &BTreeMap<&str, BTreeSet<&str>>, layers: &[(&str, &[&str])]) -> String {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (_, ms)) in layers.iter().enumerate() {
        for &m in *ms {
            assert!(index.insert(m, i).is_none(), "{m} is in two layers");
        }
    }
    let top = top_level_edges(edges);
    let mut report = String::new();
    for &a in top.keys() {
        if !a.is_empty() && !index.contains_key(a) {
            report += &format!("{a} is in no layer: add it to LAYERS\n");
        }
    }
    for (&a, bs) in &top {
        let Some(&la) = index.get(a) else { continue };
        for &b in bs {
            match index.get(b) {
                Some(&lb) if lb < la => {
                    report += &format!(
                        "{a} ({}) imports {b} ({}), a higher layer: {}\n",
                        layers[la].0,
                        layers[lb].0,
                        witnesses(edges, a, b).join(", ")
                    );
                }
                _ => {}
            }
        }
    }
    report
}

#[test]
fn every_import_runs_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeMap::new();
    modules(&src, &[], &mut mods);
    assert!(mods.len() > 20, "read {} modules from {src:?}", mods.len());
    let edges = edges_of(&mods);
    let report = layer_report(&edges, LAYERS);
    assert!(
        report.is_empty(),
        "imports against the layer order of src/ (LAYERS, top to bottom: {}):\n{report}",
        LAYERS
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The layer check finds an import that runs up, names the files behind
/// it, allows imports within a layer and down, and finds a module no layer
/// lists.
#[test]
fn the_layer_check_finds_an_import_that_runs_up() {
    let mut mods = BTreeMap::new();
    mods.insert("api".to_owned(), code("use crate::low::L;\n"));
    mods.insert("mid".to_owned(), code("mod x;\nuse crate::low::L;\n"));
    mods.insert("mid::x".to_owned(), code("use crate::api::A;\n"));
    mods.insert("low".to_owned(), code("use crate::low2::M;\n"));
    mods.insert("low2".to_owned(), code("pub struct M;\n"));
    mods.insert("stray".to_owned(), code("pub struct S;\n"));
    let layers: &[(&str, &[&str])] = &[
        ("top", &["api"]),
        ("middle", &["mid"]),
        ("bottom", &["low", "low2"]),
    ];
    let report = layer_report(&edges_of(&mods), layers);
    assert_eq!(
        report,
        "stray is in no layer: add it to LAYERS\n\
         mid (middle) imports api (top), a higher layer: mid::x -> api\n"
    );
}

/// The check itself finds a cycle, through `crate::{..}` groups too, and
/// ignores comments, test modules and a parent's own submodules.
#[test]
fn the_check_finds_a_planted_cycle() {
    let mut mods = BTreeMap::new();
    mods.insert("a".to_owned(), code("use crate::b::X;\n"));
    mods.insert("b".to_owned(), code("use crate::{c::Y, a};\n"));
    mods.insert(
        "c".to_owned(),
        code("// crate::a\n#[cfg(test)]\nuse crate::a;\n"),
    );
    mods.insert("d".to_owned(), code("use crate::d::e::Z;\n"));
    mods.insert("d::e".to_owned(), code("use crate::d::W;\n"));
    let found = cycles(&edges_of(&mods));
    assert_eq!(found, vec![vec!["a".to_owned(), "b".to_owned()]]);
}

/// The top-level check finds a cycle that only folders make (no two files
/// import each other in a circle), names the files behind its edges, and
/// leaves out what a folder's files import of each other.
#[test]
fn the_top_level_check_finds_a_cycle_through_folders() {
    let mut mods = BTreeMap::new();
    mods.insert("a".to_owned(), code("use crate::b::y::Y;\n"));
    mods.insert("b".to_owned(), code("mod x;\nmod y;\n"));
    mods.insert(
        "b::x".to_owned(),
        code("use crate::a::A;\nuse crate::b::y;\n"),
    );
    mods.insert("b::y".to_owned(), code("pub struct Y;\n"));
    mods.insert("c".to_owned(), code("use crate::a::A;\n"));
    let edges = edges_of(&mods);
    assert!(cycles(&edges).is_empty(), "no file-level cycle: {edges:?}");
    let report = top_level_report(&edges);
    assert_eq!(
        report,
        "2 top-level modules in a cycle: a, b\n    a -> b (a -> b::y)\n    b -> a (b::x -> a)\n"
    );
}
