//! Hostile input: pinning to CPUs no
//! machine has, XML paths that are not regular files, XML files that are too
//! big or have no PU, XML files whose sets contradict each other (hwloc
//! crashed or aborted on them), synthetic descriptions of billions of
//! objects or of forms hwloc aborts on, and a seeded property test feeding
//! random synthetic descriptions, mutated XML exports and random tunables to
//! `Topology::new` and `Runtime::builder()...build()`.
//!
//! Every outcome must be `Ok` or a typed `BuildError`, in bounded time: never
//! a panic, an abort or a hang. The property test runs its cases in child
//! processes (this test binary, re-executed), so an abort or a crash in a
//! case fails the test with the case's input instead of killing the binary.
//!
//! Environment: `HWSCHED_HOSTILE_SEED` (a number) changes the property
//! test's seed and `HWSCHED_HOSTILE_CASES` its number of cases.
#![cfg(unix)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hwsched::topology::{export_xml, pin_current_thread, MAX_PUS, MAX_XML_BYTES};
use hwsched::{
    BuildError, IdleMode, Runtime, SisMode, StealWalk, Topology, TopologySource, Tunables,
};

mod common;
use common::with_timeout;

fn synthetic(desc: &str) -> TopologySource {
    TopologySource::Synthetic(desc.to_owned())
}

/// A unique path in the temp directory.
fn temp_path(tag: &str) -> PathBuf {
    common::temp_path(&format!("hostile-{tag}"))
}

/// Removes the file (or empty directory) when dropped.
struct TempPath(PathBuf);

impl Drop for TempPath {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Writes `text` to a new temporary file.
fn temp_xml(tag: &str, text: &[u8]) -> TempPath {
    let file = TempPath(temp_path(tag).with_extension("xml"));
    std::fs::write(&file.0, text).expect("write the XML file");
    file
}

/// Loads `path` as an XML topology and returns the error, checking that it
/// is `InvalidXml` naming the path, and that its message contains `words`.
fn xml_error(path: &Path, words: &str) -> String {
    let source = TopologySource::Xml(path.to_owned());
    let err = match Topology::new(&source, None) {
        Ok(topo) => panic!(
            "{}: loaded {} workers, expected an error",
            path.display(),
            topo.workers()
        ),
        Err(e) => e,
    };
    let msg = err.to_string();
    match &err {
        BuildError::InvalidXml { path: p, reason } => {
            assert_eq!(p, path, "{msg}");
            assert!(reason.contains(words), "expected {words:?} in: {msg}");
        }
        other => panic!("expected InvalidXml, got {other:?}"),
    }
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    msg
}

/// The XML export of a synthetic shape.
fn exported(desc: &str) -> String {
    export_xml(&synthetic(desc)).expect("export_xml")
}

// ---------------------------------------------------------------- item 1

/// Pins a new thread (so this one keeps its affinity) and returns the result.
fn pin_on_a_thread(cpu: usize) -> bool {
    std::thread::spawn(move || pin_current_thread(cpu))
        .join()
        .expect("the pinning thread panicked")
}

#[test]
fn pinning_to_cpu_5000_is_refused_not_an_abort() {
    // core_affinity's fixed 1024-bit mask aborted the process here.
    let pinned = with_timeout(20, "pin 5000", || pin_on_a_thread(5000));
    assert!(!pinned, "no test machine has CPU 5000");
}

#[test]
fn pinning_to_cpu_1_000_000_and_beyond_is_refused() {
    let results = with_timeout(20, "pin 1000000", || {
        [1_000_000, usize::MAX / 2, usize::MAX].map(pin_on_a_thread)
    });
    assert_eq!(results, [false; 3]);
}

#[test]
fn pinning_to_cpu_0_still_works() {
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    // CPU 0, or the first CPU this process may use when 0 is not one.
    let cpu = if allowed.contains(&0) || allowed.is_empty() {
        0
    } else {
        allowed[0]
    };
    let (pinned, after) = with_timeout(20, "pin 0", move || {
        std::thread::spawn(move || (pin_current_thread(cpu), core_affinity::get_core_ids()))
            .join()
            .expect("the pinning thread panicked")
    });
    if allowed.is_empty() {
        println!("note: the affinity mask is unreadable; pinning to {cpu} gave {pinned}");
        return;
    }
    assert!(
        pinned,
        "pinning to CPU {cpu} (allowed: {allowed:?}) was refused"
    );
    let after: Vec<usize> = after
        .expect("affinity after pinning")
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(after, vec![cpu], "the pinned thread's affinity");
}

// ---------------------------------------------------------------- item 2

#[test]
fn xml_path_that_is_a_directory_is_refused() {
    // hwlocality hit `unreachable!` (a panic) on a directory.
    let dir = TempPath(temp_path("dir"));
    std::fs::create_dir(&dir.0).expect("create a directory");
    let path = dir.0.clone();
    let msg = with_timeout(20, "xml directory", move || {
        xml_error(&path, "not a regular file")
    });
    assert!(msg.contains("directory"), "{msg}");
}

#[test]
fn xml_path_that_is_a_fifo_is_refused() {
    // hwloc opened the FIFO and waited for a writer forever.
    let fifo = TempPath(temp_path("fifo"));
    let c_path = std::ffi::CString::new(fifo.0.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
    let path = fifo.0.clone();
    let msg = with_timeout(20, "xml fifo", move || {
        xml_error(&path, "not a regular file")
    });
    assert!(msg.contains("FIFO"), "{msg}");
}

#[test]
fn xml_file_over_the_size_limit_is_refused() {
    // A sparse file one byte over the limit: nothing is read.
    let file = TempPath(temp_path("huge").with_extension("xml"));
    let f = std::fs::File::create(&file.0).expect("create");
    f.set_len(MAX_XML_BYTES + 1).expect("set_len");
    drop(f);
    let path = file.0.clone();
    let msg = with_timeout(20, "xml too big", move || {
        xml_error(&path, "larger than the limit")
    });
    assert!(msg.contains(&MAX_XML_BYTES.to_string()), "{msg}");
    // /dev/zero is endless: refused as a device, not read.
    let msg = with_timeout(20, "xml /dev/zero", || {
        xml_error(Path::new("/dev/zero"), "not a regular file")
    });
    assert!(msg.contains("device"), "{msg}");
}

#[test]
fn xml_without_any_pu_is_refused() {
    // hwloc's consistency check aborted debug builds (a PU level is
    // required); release builds said EmptyCpuset.
    let xml = exported("pack:2 core:2 pu:2");
    let without: String = xml
        .lines()
        .filter(|l| !l.contains("type=\"PU\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!without.contains("\"PU\""));
    let file = temp_xml("nopu", without.as_bytes());
    let path = file.0.clone();
    with_timeout(20, "xml without PU", move || xml_error(&path, "no PU"));
}

#[test]
fn xml_whose_pu_cpuset_contradicts_its_os_index_is_handled() {
    // hwloc's consistency check aborted debug builds
    // (`hwloc_bitmap_first(obj->cpuset) == (int) obj->os_index`). The sets
    // are rebuilt from the OS indices, so the file loads.
    let xml = exported("pack:2 core:2 pu:2");
    let bad = xml
        .replacen(
            "os_index=\"6\" cpuset=\"0x00000040\"",
            "os_index=\"X\" cpuset=\"0x00000040\"",
            1,
        )
        .replacen(
            "os_index=\"7\" cpuset=\"0x00000080\"",
            "os_index=\"6\" cpuset=\"0x00000080\"",
            1,
        )
        .replacen("os_index=\"X\"", "os_index=\"7\"", 1);
    assert_ne!(bad, xml);
    let file = temp_xml("pu-os", bad.as_bytes());
    let path = file.0.clone();
    let topo = with_timeout(20, "xml PU os_index", move || {
        Topology::new(&TopologySource::Xml(path), None)
    })
    .expect("the rebuilt XML loads");
    let mut os: Vec<usize> = (0..topo.workers())
        .map(|w| topo.place(w).os_index)
        .collect();
    os.sort_unstable();
    assert_eq!(os, (0..8).collect::<Vec<usize>>());
}

#[test]
fn xml_object_without_complete_cpuset_is_handled() {
    // hwloc_topology_load crashed with a segmentation fault (in release
    // builds too) on a Core without complete_cpuset.
    let xml = exported("pack:2 [numa] core:2 pu:2");
    let bad = xml.replacen(
        "complete_cpuset=\"0x0000000c\"",
        "complete_cpusee=\"0x0000000c\"",
        1,
    );
    assert_ne!(bad, xml);
    let file = temp_xml("nocomplete", bad.as_bytes());
    let path = file.0.clone();
    let topo = with_timeout(20, "xml complete_cpuset", move || {
        Topology::new(&TopologySource::Xml(path), None)
    })
    .expect("the rebuilt XML loads");
    assert_eq!(topo.workers(), 8);
}

#[test]
fn xml_with_duplicate_pu_os_index_names_it() {
    let xml = exported("core:2 pu:2");
    let bad = xml.replacen("os_index=\"3\"", "os_index=\"1\"", 1);
    assert_ne!(bad, xml);
    let file = temp_xml("dup", bad.as_bytes());
    let path = file.0.clone();
    let msg = with_timeout(20, "xml duplicate PU", move || {
        xml_error(&path, "os_index 1")
    });
    assert!(msg.contains("two PU"), "{msg}");
}

#[test]
fn hostile_xml_documents_are_refused_quickly() {
    let nested = format!(
        "<topology><object type=\"Machine\">{}</object></topology>",
        "<object type=\"Group\">".repeat(100_000)
    );
    let laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [<!ENTITY lol \"lol\">\
                  <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">]>\n\
                  <topology><object type=\"Machine\" name=\"&lol2;\"/></topology>";
    let long_attr = format!(
        "<topology><object type=\"Machine\" cpuset=\"{}\"><object type=\"PU\" os_index=\"0\"/></object></topology>",
        "0xffffffff,".repeat(1 << 20)
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("nested", nested.into_bytes(), "deeper than"),
        ("laughs", laughs.as_bytes().to_vec(), "internal subset"),
        ("nul", b"<topology>\0</topology>".to_vec(), "no object"),
        ("utf8", b"<topology>\xff</topology>".to_vec(), "not UTF-8"),
        ("empty", Vec::new(), "no <topology>"),
        ("hwloc1", b"<topology><object type=\"System\"/></topology>".to_vec(), "System"),
        ("os-index", b"<topology><object type=\"Machine\"><object type=\"PU\" os_index=\"8192\"/></object></topology>".to_vec(), "8191"),
    ];
    for (tag, text, words) in cases {
        let file = temp_xml(tag, &text);
        let path = file.0.clone();
        let started = Instant::now();
        let words = words.to_owned();
        with_timeout(20, tag, move || xml_error(&path, &words));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{tag}: {:?}",
            started.elapsed()
        );
    }
    // A long but harmless attribute of the machine is ignored.
    let file = temp_xml("long", long_attr.as_bytes());
    let path = file.0.clone();
    let topo = with_timeout(20, "long attribute", move || {
        Topology::new(&TopologySource::Xml(path), None)
    })
    .expect("the machine's cpuset is recomputed");
    assert_eq!(topo.workers(), 1);
}

#[test]
fn huge_synthetic_is_refused_before_hwloc_builds_it() {
    // hwloc built 10^10 objects and never returned.
    for desc in [
        "pack:100000 pu:100000",
        "pack:2(memory=1GB) core:0x100000 pu:2",
        "4294967295 4294967295 4294967295 4294967295 4294967295",
        "pu:2(indexes=0,4000000000)",
    ] {
        let d = desc.to_owned();
        let started = Instant::now();
        let err = with_timeout(20, "huge synthetic", move || {
            Topology::new(&synthetic(&d), None)
        })
        .expect_err(desc);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{desc}: {:?}",
            started.elapsed()
        );
        let msg = err.to_string();
        match &err {
            BuildError::InvalidSynthetic { description, .. } => assert_eq!(description, desc),
            other => panic!("{desc}: expected InvalidSynthetic, got {other:?}"),
        }
        assert!(msg.contains(&format!("{desc:?}")), "{msg}");
        assert!(
            msg.contains(&MAX_PUS.to_string()) || msg.contains("objects"),
            "{msg}"
        );
    }
    // Within the limits still builds.
    let topo = Topology::new(
        &synthetic("pack:2 core:4 pu:2(indexes=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15)"),
        None,
    )
    .expect("a small shape with explicit indexes");
    assert_eq!(topo.workers(), 16);
}

#[test]
fn synthetic_memcache_level_is_refused_not_an_abort() {
    // Found by the property test: hwloc accepts a memory-side cache level,
    // then fails an assertion building it (hwloc__look_synthetic), in
    // release builds too.
    for desc in [
        "memcache:2 pu:2",
        "pack:2 MemCa:1 pu:2",
        "memory-side cache:2 pu:1",
    ] {
        let d = desc.to_owned();
        let err = with_timeout(20, "memcache", move || Topology::new(&synthetic(&d), None))
            .expect_err(desc);
        match &err {
            BuildError::InvalidSynthetic {
                description,
                reason,
            } => {
                assert_eq!(description, desc);
                assert!(reason.contains("memcache"), "{err}");
            }
            other => panic!("{desc}: expected InvalidSynthetic, got {other:?}"),
        }
    }
}

// ------------------------------------------------------- property test

/// The environment variable naming a child's batch: `seed:first:count`.
const CASE_ENV: &str = "HWSCHED_HOSTILE_CASE";
/// This test's name, the filter a child runs.
const PROPERTY_TEST: &str = "random_inputs_give_ok_or_a_typed_error";
/// Cases per child process.
const BATCH: u64 = 10;
/// A child that has not exited by then is killed and fails the test.
const CHILD_TIMEOUT: Duration = Duration::from_secs(20);

/// xorshift64* (no dependency).
struct Rng(u64);

impl Rng {
    fn new(seed: u64, case: u64) -> Rng {
        // splitmix64 of seed and case, never zero.
        let mut z = seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.below(words.len())]
    }
}

/// hwloc's type names (and aliases), names it refuses, and garbage.
const LEVEL_NAMES: &[&str] = &[
    "pack",
    "package",
    "socket",
    "die",
    "numa",
    "node",
    "core",
    "pu",
    "l1",
    "l2",
    "l3",
    "l4",
    "l5",
    "l1i",
    "l2i",
    "l3i",
    "l1d",
    "l2d",
    "group",
    "group1",
    "tile",
    "module",
    "cache",
    "machine",
    "misc",
    "bridge",
    "pcidev",
    "osdev",
    "memcache",
    "MemCa",
    "memory-side cache",
    "PU",
    "Core",
    "NUMANode",
    "bogus",
    "",
    "pu pu",
    "::",
    "l9",
    "group0",
];

const COUNTS: &[&str] = &[
    "0",
    "1",
    "1",
    "2",
    "2",
    "2",
    "3",
    "4",
    "8",
    "16",
    "0x10",
    "010",
    "+2",
    "-1",
    " 2",
    "1e3",
    "64",
    "4096",
    "4097",
    "65536",
    "100000",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "",
    "x",
];

const ATTRS: &[&str] = &[
    "(memory=1GB)",
    "(memory=0)",
    "(size=32kB)",
    "(indexes=0,1)",
    "(indexes=1,0,3,2)",
    "(indexes=pack:core)",
    "(indexes=2*2:1*2)",
    "(indexes=4000000000)",
    "(indexes=0,4095)",
    "(indexes=0,4096)",
    "(bogus=1)",
    "(memory=1GB",
    "()",
    "(indexes=)",
    "(memorysidecachesize=1GB)",
];

const ATTACHED: &[&str] = &[
    "[numa]",
    "[numa(memory=2GB)]",
    "[numa",
    "[core]",
    "[]",
    "[numa(indexes=0,1)]",
    "[numa(memorysidecachesize=1GB)]",
    "[memcache]",
];

/// A random synthetic description: half of them hwloc's levels in order
/// with small counts (one level may be large), the others hwloc's grammar
/// with random names, counts and attributes, sometimes byte-mutated.
fn random_synthetic(rng: &mut Rng) -> String {
    if rng.chance(50) {
        return ordered_synthetic(rng);
    }
    let mut s = String::new();
    if rng.chance(5) {
        s.push_str(rng.word(&["(memory=1GB) ", "(indexes=0) ", "( "]));
    }
    let levels = rng.below(7);
    for i in 0..levels {
        if i > 0 {
            s.push_str(rng.word(&[" ", " ", " ", "  ", "\n", "\t", ""]));
        }
        if rng.chance(8) {
            s.push_str(rng.word(ATTACHED));
            s.push(' ');
        }
        let last = i + 1 == levels;
        let name = if last && rng.chance(70) {
            "pu"
        } else {
            rng.pick(LEVEL_NAMES)
        };
        if !name.is_empty() {
            s.push_str(name);
            if !rng.chance(3) {
                s.push(':');
            }
        }
        // Small counts mostly; huge ones must be refused quickly.
        let count = if rng.chance(70) {
            rng.pick(&["1", "2", "2", "3", "4"])
        } else {
            rng.pick(COUNTS)
        };
        s.push_str(count);
        if rng.chance(10) {
            s.push_str(rng.word(ATTRS));
        }
    }
    if rng.chance(5) {
        s.push_str(rng.word(&[" [numa]", " ", "\n", " pu:2", ":"]));
    }
    if rng.chance(10) {
        let mut bytes = s.into_bytes();
        for _ in 0..1 + rng.below(3) {
            let b = *rng.pick(&[
                b'\0', b':', b' ', b'(', b')', b'[', b']', b'0', b'9', 0xff, b'x',
            ]);
            if bytes.is_empty() || rng.chance(50) {
                let at = rng.below(bytes.len() + 1);
                bytes.insert(at, b);
            } else {
                let at = rng.below(bytes.len());
                bytes[at] = b;
            }
        }
        s = String::from_utf8_lossy(&bytes).into_owned();
    }
    s
}

/// hwloc's levels in order, each present or not, ending with PUs; counts
/// mostly 1 to 4, one of them sometimes up to 64 or huge.
fn ordered_synthetic(rng: &mut Rng) -> String {
    const ORDER: &[&str] = &[
        "pack", "die", "numa", "l3", "group", "l2", "l1", "l1i", "core",
    ];
    let mut levels: Vec<String> = ORDER
        .iter()
        .filter(|_| rng.chance(35))
        .map(|name| (*name).to_owned())
        .collect();
    levels.push("pu".to_owned());
    let big = if rng.chance(30) {
        Some(rng.below(levels.len()))
    } else {
        None
    };
    let mut parts = Vec::new();
    for (i, name) in levels.iter().enumerate() {
        let count = match big {
            Some(b) if b == i => {
                if rng.chance(20) {
                    rng.pick(&["4097", "100000", "4294967295", "0x100000"])
                        .to_string()
                } else {
                    (5 + rng.below(60)).to_string()
                }
            }
            _ => (1 + rng.below(4)).to_string(),
        };
        let attrs = match (name.as_str(), rng.below(10)) {
            ("pack" | "numa", 0) => "(memory=2GB)",
            ("l3" | "l2" | "l1", 0) => "(size=4MB)",
            _ => "",
        };
        parts.push(format!("{name}:{count}{attrs}"));
        if rng.chance(5) && name != "numa" {
            parts.push("[numa]".to_owned());
        }
    }
    parts.join(" ")
}

/// Valid XML exports to mutate.
fn xml_bases() -> Vec<String> {
    [
        "pack:2 core:2 pu:2",
        "pack:2 [numa] l3:1 core:2 pu:2",
        "numa:2 pack:1 l2:2 l1:1 core:1 pu:2",
        "pack:2 group:2 core:1 pu:1",
        "core:1 pu:1",
    ]
    .iter()
    .map(|d| exported(d))
    .collect()
}

/// Hostile attribute values.
const VALUES: &[&str] = &[
    "0",
    "1",
    "7",
    "9",
    "65535",
    "16384",
    "4000000000",
    "-1",
    "",
    "0x0",
    "0x00000001",
    "0xffffffff",
    "0xf...f",
    "0x00000100,,,0x0",
    "0x1,0x1",
    "x",
    "&amp;",
    "&bogus;",
    "1e9",
    "Machine",
    "PU",
    "Core",
    "NUMANode",
    "Misc",
    "Group",
    "L2Cache",
    "L1iCache",
    "Bridge",
    "System",
    "Socket",
    "Cache",
    "MemCache",
];

/// A random mutation of a valid export: byte flips, truncations, deleted,
/// duplicated or moved lines, deleted object subtrees, attribute values
/// replaced by hostile ones, renamed attributes.
fn random_xml(rng: &mut Rng, bases: &[String]) -> Vec<u8> {
    let mut text = rng.pick(bases).clone().into_bytes();
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 if !text.is_empty() => {
                let at = rng.below(text.len());
                text[at] = if rng.chance(30) {
                    rng.next() as u8
                } else {
                    *rng.pick(b"0123456789abcdefx,\"'<>/= &;")
                };
            }
            1 => {
                let at = rng.below(text.len() + 1);
                text.truncate(at);
            }
            2 | 3 => {
                let mut lines: Vec<&[u8]> = text.split(|&c| c == b'\n').collect();
                if lines.len() > 1 {
                    let a = rng.below(lines.len());
                    match rng.below(3) {
                        0 => {
                            lines.remove(a);
                        }
                        1 => {
                            let b = rng.below(lines.len());
                            lines.insert(b, lines[a]);
                        }
                        _ => {
                            let l = lines.remove(a);
                            let b = rng.below(lines.len());
                            lines.insert(b, l);
                        }
                    }
                }
                text = lines.join(&b'\n');
            }
            4 => {
                // Delete one object element with its subtree.
                let s = String::from_utf8_lossy(&text).into_owned();
                let starts: Vec<usize> = s.match_indices("<object").map(|(i, _)| i).collect();
                if !starts.is_empty() {
                    let start = *rng.pick(&starts);
                    if let Some(end) = subtree_end(&s, start) {
                        let mut out = s[..start].to_owned();
                        out.push_str(&s[end..]);
                        text = out.into_bytes();
                    }
                }
            }
            5 | 6 => {
                // Replace an attribute value.
                let s = String::from_utf8_lossy(&text).into_owned();
                let quotes: Vec<usize> = s.match_indices("=\"").map(|(i, _)| i + 2).collect();
                if !quotes.is_empty() {
                    let start = *rng.pick(&quotes);
                    if let Some(len) = s[start..].find('"') {
                        let value = rng.pick(VALUES);
                        text = format!("{}{value}{}", &s[..start], &s[start + len..]).into_bytes();
                    }
                }
            }
            _ => {
                // Rename an attribute (dropping it for hwloc).
                let s = String::from_utf8_lossy(&text).into_owned();
                let names = [
                    " os_index=",
                    " cpuset=",
                    " complete_cpuset=",
                    " nodeset=",
                    " type=",
                    " gp_index=",
                    " depth=",
                    " cache_type=",
                ];
                let name = rng.pick(&names);
                let hits: Vec<usize> = s.match_indices(name).map(|(i, _)| i).collect();
                if !hits.is_empty() {
                    let at = *rng.pick(&hits) + 1;
                    text = format!("{}x{}", &s[..at], &s[at + 1..]).into_bytes();
                }
            }
        }
    }
    text
}

/// Object types for random trees: hwloc's, its 1.x names, and garbage.
const XML_TYPES: &[&str] = &[
    "Package", "Package", "Die", "Group", "Group", "L3Cache", "L2Cache", "L1Cache", "L1iCache",
    "L2iCache", "L5Cache", "Core", "Core", "PU", "PU", "PU", "PU", "NUMANode", "NUMANode",
    "MemCache", "Misc", "Bridge", "PCIDev", "OSDev", "Machine", "System", "Socket", "Cache",
    "Bogus",
];

/// A well-formed XML of a random object tree: random types in any order,
/// OS indices small, repeated, missing, huge or not numbers, sets present or
/// not and mostly wrong.
fn random_tree_xml(rng: &mut Rng) -> String {
    fn object(rng: &mut Rng, depth: usize, out: &mut String) {
        let ty = if depth == 0 && rng.chance(90) {
            "Machine"
        } else {
            *rng.pick(XML_TYPES)
        };
        out.push_str(&format!("<object type=\"{ty}\""));
        if rng.chance(90) {
            let os = *rng.pick(&[
                "0",
                "1",
                "2",
                "3",
                "4",
                "5",
                "6",
                "7",
                "8191",
                "8192",
                "4000000000",
                "-1",
                "x",
                "",
            ]);
            let os = if rng.chance(50) {
                (rng.next() % 16).to_string()
            } else {
                os.to_owned()
            };
            out.push_str(&format!(" os_index=\"{os}\""));
        }
        for set in [
            "cpuset",
            "complete_cpuset",
            "nodeset",
            "complete_nodeset",
            "allowed_cpuset",
            "allowed_nodeset",
        ] {
            if rng.chance(30) {
                let v = *rng.pick(&[
                    "0x0",
                    "0x00000001",
                    "0x000000ff",
                    "0xf...f",
                    "0x1,,,0x0",
                    "zz",
                    "",
                ]);
                out.push_str(&format!(" {set}=\"{v}\""));
            }
        }
        if rng.chance(20) {
            out.push_str(&format!(
                " cache_type=\"{}\" depth=\"{}\" cache_size=\"{}\"",
                rng.below(4),
                rng.below(7),
                rng.next() % 100_000
            ));
        }
        if rng.chance(10) {
            out.push_str(&format!(" local_memory=\"{}\"", rng.next()));
        }
        let children = if depth >= 5 { 0 } else { rng.below(4) };
        if children == 0 && rng.chance(50) {
            out.push_str("/>\n");
            return;
        }
        out.push_str(">\n");
        if rng.chance(10) {
            out.push_str("<info name=\"x\" value=\"y\"/><page_type size=\"4096\" count=\"1\"/>\n");
        }
        for _ in 0..children {
            object(rng, depth + 1, out);
        }
        out.push_str("</object>\n");
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n");
    object(rng, 0, &mut out);
    if rng.chance(10) {
        object(rng, 0, &mut out);
    }
    out.push_str("<support name=\"discovery.pu\"/>\n</topology>\n");
    out
}

/// The end of the `<object` element starting at `start` (after its end
/// tag, or after `/>`).
fn subtree_end(s: &str, start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with("</object>") {
            depth = depth.checked_sub(1)?;
            i += "</object>".len();
            if depth == 0 {
                return Some(i);
            }
        } else if rest.starts_with("<object") {
            let close = rest.find('>')?;
            if rest[..close].ends_with('/') {
                if depth == 0 {
                    return Some(i + close + 1);
                }
            } else {
                depth += 1;
            }
            i += close + 1;
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    None
}

fn random_duration(rng: &mut Rng) -> Duration {
    let any = Duration::from_nanos(rng.next() % 2_000_000_000);
    *rng.pick(&[
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(1),
        Duration::from_micros(500),
        Duration::from_millis(1),
        Duration::from_millis(10),
        Duration::from_millis(100),
        Duration::from_millis(101),
        Duration::from_secs(1),
        Duration::from_secs(2),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
        any,
    ])
}

/// Random tunables: each field valid or not.
fn random_tunables(rng: &mut Rng) -> Tunables {
    let mut t = Tunables::default();
    if rng.chance(50) {
        t.load_update_interval = random_duration(rng);
    }
    if rng.chance(50) {
        t.migration_cost = random_duration(rng);
    }
    if rng.chance(30) {
        t.walk = *rng.pick(&[StealWalk::Bounded, StealWalk::Unbounded]);
    }
    if rng.chance(30) {
        t.sis = *rng.pick(&[SisMode::Prop, SisMode::Util, SisMode::Full, SisMode::Off]);
    }
    t.sis_recent_used = rng.chance(50);
    t.sis_idle_core = rng.chance(50);
    if rng.chance(50) {
        // Spinning is capped at 10 ms so the case stays short.
        let spin = random_duration(rng).min(Duration::from_millis(10));
        let spin = if rng.chance(20) {
            random_duration(rng)
        } else {
            spin
        };
        t.idle = *rng.pick(&[
            IdleMode::Governed,
            IdleMode::AlwaysPark,
            IdleMode::AlwaysSpin(spin),
        ]);
    }
    if rng.chance(40) {
        t.park_cost = Some(random_duration(rng));
    }
    if rng.chance(50) {
        let any = (rng.next() % 200) as u32;
        t.spin_cap_percent = *rng.pick(&[0, 1, 25, 100, 101, u32::MAX, any]);
    }
    t
}

/// One case's input, printed before it runs (a child that dies shows it).
#[derive(Debug)]
enum Input {
    Synthetic {
        desc: String,
        workers: Option<usize>,
        runtime: bool,
    },
    Xml {
        text: String,
        workers: Option<usize>,
        runtime: bool,
    },
    Tunables {
        tunables: Tunables,
        workers: usize,
    },
}

fn random_input(rng: &mut Rng, bases: &[String]) -> Input {
    let workers = |rng: &mut Rng| -> Option<usize> {
        if rng.chance(40) {
            None
        } else {
            Some(*rng.pick(&[0, 1, 2, 3, 4, 5, 9, 100, 5000, usize::MAX]))
        }
    };
    match rng.below(10) {
        0..=3 => Input::Synthetic {
            desc: random_synthetic(rng),
            workers: workers(rng),
            runtime: rng.chance(30),
        },
        4..=7 => Input::Xml {
            text: if rng.chance(35) {
                random_tree_xml(rng)
            } else {
                String::from_utf8_lossy(&random_xml(rng, bases)).into_owned()
            },
            workers: workers(rng),
            runtime: rng.chance(30),
        },
        _ => Input::Tunables {
            tunables: random_tunables(rng),
            workers: 1 + rng.below(2),
        },
    }
}

/// Checks that an error names the value that was wrong.
fn check_error(err: &BuildError, input: &Input, xml_path: Option<&Path>) {
    let msg = err.to_string();
    assert!(!msg.is_empty());
    match (err, input) {
        (BuildError::InvalidSynthetic { description, .. }, Input::Synthetic { desc, .. }) => {
            assert_eq!(description, desc);
            assert!(msg.contains(&format!("{desc:?}")), "{msg}");
        }
        (BuildError::InvalidXml { path, .. }, Input::Xml { .. }) => {
            assert_eq!(Some(path.as_path()), xml_path, "{msg}");
        }
        (BuildError::InvalidTunable { name, .. }, Input::Tunables { .. }) => {
            assert!(msg.contains(name), "{msg}");
        }
        (
            BuildError::ZeroWorkers
            | BuildError::TooManyWorkers { .. }
            | BuildError::EmptyCpuset { .. },
            Input::Synthetic { .. } | Input::Xml { .. },
        ) => {}
        (other, input) => panic!("unexpected error {other:?} for {input:?}"),
    }
}

/// Builds a runtime on `topology`, runs a task on it and shuts it down.
fn run_runtime(
    source: TopologySource,
    workers: usize,
    tunables: Tunables,
) -> Result<(), BuildError> {
    let rt = Runtime::builder()
        .topology(source)
        .worker_threads(workers)
        .tunables(tunables)
        .build()?;
    let answer = rt.block_on(async {
        let h = hwsched::spawn(async { 40 + 2 });
        h.await.expect("the task")
    });
    assert_eq!(answer, 42);
    assert!(
        rt.shutdown_timeout(Duration::from_secs(10)),
        "shutdown timed out"
    );
    Ok(())
}

/// Runs one case; panics if the outcome is neither `Ok` nor a typed error
/// naming the input. Returns the outcome, for the child's log.
fn run_case(input: &Input) -> String {
    let outcome = |r: &Result<Topology, BuildError>| match r {
        Ok(topo) => format!("ok: {} workers", topo.workers()),
        Err(e) => format!("error: {e}"),
    };
    match input {
        Input::Synthetic {
            desc,
            workers,
            runtime,
        } => {
            let source = synthetic(desc);
            let result = Topology::new(&source, *workers);
            let label = outcome(&result);
            match result {
                Ok(topo) => {
                    assert!(topo.workers() >= 1);
                    if *runtime && topo.workers() <= 8 {
                        if let Err(e) =
                            run_runtime(source, topo.workers().min(4), Tunables::default())
                        {
                            panic!("the topology built but the runtime did not: {e}");
                        }
                    }
                }
                Err(e) => check_error(&e, input, None),
            }
            label
        }
        Input::Xml {
            text,
            workers,
            runtime,
        } => {
            let file = temp_xml("case", text.as_bytes());
            let source = TopologySource::Xml(file.0.clone());
            let result = Topology::new(&source, *workers);
            let label = outcome(&result);
            match result {
                Ok(topo) => {
                    assert!(topo.workers() >= 1);
                    if *runtime && topo.workers() <= 8 {
                        if let Err(e) =
                            run_runtime(source, topo.workers().min(4), Tunables::default())
                        {
                            panic!("the topology built but the runtime did not: {e}");
                        }
                    }
                }
                Err(e) => check_error(&e, input, Some(&file.0)),
            }
            label
        }
        Input::Tunables { tunables, workers } => {
            let valid = tunables.validate();
            match run_runtime(synthetic("core:2 pu:1"), *workers, tunables.clone()) {
                Ok(()) => {
                    assert!(valid.is_ok(), "built with invalid tunables {tunables:?}");
                    "ok: ran".to_owned()
                }
                Err(e) => {
                    check_error(&e, input, None);
                    assert!(valid.is_err(), "valid tunables refused: {e}");
                    format!("error: {e}")
                }
            }
        }
    }
}

/// The child: runs cases `first .. first + count` of `seed`, printing each
/// input before running it.
fn run_child(spec: &str) {
    let parts: Vec<u64> = spec
        .split(':')
        .map(|p| p.parse().expect("case spec"))
        .collect();
    let [seed, first, count] = parts[..] else {
        panic!("bad {CASE_ENV}={spec}");
    };
    let bases = xml_bases();
    let mut out = std::io::stdout();
    for case in first..first + count {
        let mut rng = Rng::new(seed, case);
        let input = random_input(&mut rng, &bases);
        let _ = writeln!(out, "CASE {seed}:{case} {input:?}");
        let _ = out.flush();
        let outcome = run_case(&input);
        let _ = writeln!(out, "DONE {seed}:{case} {outcome}");
        let _ = out.flush();
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs one child on a batch and returns why it failed, if it did.
fn run_batch(seed: u64, first: u64, count: u64) -> Result<(), String> {
    let out_path = TempPath(temp_path("child-out"));
    let err_path = TempPath(temp_path("child-err"));
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = Command::new(exe)
        .args([PROPERTY_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CASE_ENV, format!("{seed}:{first}:{count}"))
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path.0).map_err(|e| e.to_string())?)
        .stderr(std::fs::File::create(&err_path.0).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("spawn the child: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > CHILD_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("wait for the child: {e}")),
        }
    };
    if status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    let stdout = std::fs::read_to_string(&out_path.0).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path.0).unwrap_or_default();
    // (The first case's line follows the harness's "test ... " on its line.)
    let last_case = stdout
        .lines()
        .rev()
        .find_map(|l| l.find("CASE ").map(|at| &l[at..]))
        .unwrap_or("(no case started)");
    let why = match status {
        None => format!("did not finish in {CHILD_TIMEOUT:?} (killed)"),
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            match s.signal() {
                Some(sig) => format!("was killed by signal {sig}"),
                None => format!("exited with {s} (a panic or a failed check)"),
            }
        }
    };
    let tail: String = stderr
        .lines()
        .rev()
        .take(25)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    Err(format!(
        "the child running cases {seed}:{first}..{} {why}\nlast case started: {last_case}\nstderr (tail):\n{tail}",
        first + count
    ))
}

#[test]
fn random_inputs_give_ok_or_a_typed_error() {
    if let Ok(spec) = std::env::var(CASE_ENV) {
        run_child(&spec);
        return;
    }
    let seed = env_number("HWSCHED_HOSTILE_SEED", 0x17_5eed);
    let cases = env_number("HWSCHED_HOSTILE_CASES", 400);
    let started = Instant::now();
    let batches: Vec<(u64, u64)> = (0..cases)
        .step_by(BATCH as usize)
        .map(|first| (first, BATCH.min(cases - first)))
        .collect();
    // Two children at a time.
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(first, count)) = batches.get(i) else {
                    break;
                };
                if let Err(e) = run_batch(seed, first, count) {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    println!(
        "{cases} cases (seed {seed:#x}) in {} children, {:.1}s",
        batches.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failing batches:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
