//! hwloc discovery: from a [`TopologySource`] to a [`Topology`].

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::Topology as HwTopology;

use super::domain::{build_levels, LevelKind, Topology, WorkerPlace};
use crate::error::BuildError;

/// The most PUs a synthetic description or an XML topology may have.
///
/// hwloc's construction of a synthetic topology grows faster than the
/// square of the PU count (with hwloc 2.9, a flat `"pu:4096"` takes a
/// second, a flat `"pu:16384"` a minute, and so does the balanced
/// `"pack:16 core:1024 pu:4"`), and a topology with `n` PUs and no grouping
/// gives every worker `n` groups, so larger inputs are refused before hwloc
/// sees them.
pub const MAX_PUS: usize = 1 << 12;

/// The most objects a synthetic description may create: the sum of the
/// widths of its levels (the running products of the counts) plus its
/// attached (`[numa]`) memory objects.
///
/// A description within [`MAX_PUS`] can still ask hwloc for hundreds of
/// thousands of objects (`"pack:4096 group:1 group:1 ... pu:1"`, or many
/// `[numa]`): 60000 take it about 17 seconds.
pub const MAX_SYNTHETIC_OBJECTS: u64 = 1 << 13;

/// The most objects (machine, packages, caches, cores, PUs, NUMA nodes) an
/// XML topology may have once its I/O and Misc objects are left out (an
/// `lstopo` export of a 4096-PU machine has about 12000).
pub const MAX_XML_OBJECTS: usize = 1 << 14;

/// The largest PU or NUMA node OS index an XML topology may use (Linux's
/// `NR_CPUS` is at most 8192, `MAX_NUMNODES` at most 1024). Every object's
/// sets are written as bitmaps up to the largest index, so this bounds the
/// XML hwloc is given.
pub const MAX_XML_OS_INDEX: u32 = 8191;

/// The largest XML topology file accepted, in bytes (64 MiB; `lstopo`
/// exports of the largest machines are a few MiB).
pub const MAX_XML_BYTES: u64 = 64 << 20;

/// Where a [`Topology`] comes from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TopologySource {
    /// hwloc discovery of this machine, restricted to the CPUs this process is
    /// allowed to run on (its affinity mask and hwloc's allowed cpuset).
    #[default]
    System,
    /// An hwloc synthetic description such as `"pack:2 l3:2 core:4 pu:2"`
    /// (see hwloc's documentation of synthetic topologies). Its workers are
    /// not real CPUs and are not pinned by default.
    ///
    /// Limits, checked before hwloc sees the description (a description
    /// over them is refused with [`BuildError::InvalidSynthetic`] naming it
    /// and the limit): at most [`MAX_PUS`] PUs (the product of the level
    /// counts: `"pack:100000 pu:100000"` is refused, not built) and at most
    /// [`MAX_SYNTHETIC_OBJECTS`] objects in all. Also refused, because
    /// hwloc accepts them and then fails an assertion (an abort, in release
    /// builds too): memory-side cache levels (`memcache:2`), interleaved
    /// `indexes=` (`indexes=pu:core`, `indexes=2*4:1*2`) and explicit
    /// `indexes=` lists that repeat an index; explicit indexes must be
    /// below [`MAX_PUS`].
    Synthetic(String),
    /// An XML file exported by `lstopo file.xml` or [`export_xml`].
    ///
    /// The file must be a regular file (not a directory, FIFO or device) of
    /// at most [`MAX_XML_BYTES`], in UTF-8, with at least one PU, at most
    /// [`MAX_PUS`] PUs and [`MAX_XML_OBJECTS`] objects, and PU and NUMA
    /// OS indices up to [`MAX_XML_OS_INDEX`]; anything else is refused with
    /// [`BuildError::InvalidXml`] naming the path and the reason.
    ///
    /// hwsched reads the file itself, checks its object tree (unique PU and
    /// NUMA OS indices, types nested in hwloc's order) and gives hwloc a
    /// rebuilt XML with consistent cpusets and nodesets: hwloc trusts its
    /// XML input and crashes or aborts on some inconsistent files. Only
    /// what hwsched uses is kept: the CPU and memory hierarchy, OS indices
    /// and cache attributes; I/O, Misc objects, infos and distances are
    /// left out.
    Xml(PathBuf),
}

fn load(source: &TopologySource) -> Result<HwTopology, BuildError> {
    let builder = HwTopology::builder();
    let builder = match source {
        TopologySource::System => builder,
        TopologySource::Synthetic(desc) => {
            let invalid = |reason: String| BuildError::InvalidSynthetic {
                description: desc.clone(),
                reason,
            };
            if desc.trim().is_empty() {
                return Err(invalid("the description is empty".into()));
            }
            check_synthetic_size(desc).map_err(invalid)?;
            builder
                .from_synthetic(desc)
                .map_err(|e| invalid(format!("hwloc rejected it ({e})")))?
        }
        TopologySource::Xml(path) => {
            let invalid = |reason: String| BuildError::InvalidXml {
                path: path.clone(),
                reason,
            };
            let text = read_xml_file(path).map_err(invalid)?;
            let clean = super::xml::sanitize(&text).map_err(invalid)?;
            builder
                .from_xml(&clean)
                .map_err(|e| invalid(format!("hwloc rejected it ({e})")))?
        }
    };
    builder.build().map_err(|e| match source {
        TopologySource::Synthetic(desc) => BuildError::InvalidSynthetic {
            description: desc.clone(),
            reason: format!("hwloc could not build it ({e})"),
        },
        TopologySource::Xml(path) => BuildError::InvalidXml {
            path: path.clone(),
            reason: format!("hwloc could not build it ({e})"),
        },
        TopologySource::System => BuildError::Hwloc(e.to_string()),
    })
}

/// Reads an XML topology file: a regular file of at most [`MAX_XML_BYTES`]
/// bytes of UTF-8. The file is opened without blocking (a FIFO would block
/// `open` forever) and its type is checked on the open file, so it cannot
/// change between the check and the read.
fn read_xml_file(path: &Path) -> Result<String, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        _ => format!("cannot open it ({e})"),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read its metadata ({e})"))?;
    if !meta.is_file() {
        return Err(format!("not a regular file (it is {})", file_kind(&meta)));
    }
    let too_big = |len: u64| {
        format!(
            "it is {len} bytes, larger than the limit of {MAX_XML_BYTES} bytes \
             (hwsched::topology::MAX_XML_BYTES)"
        )
    };
    if meta.len() > MAX_XML_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_XML_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it ({e})"))?;
    if bytes.len() as u64 > MAX_XML_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a FIFO";
        }
        if ty.is_socket() {
            return "a socket";
        }
        if ty.is_char_device() {
            return "a character device";
        }
        if ty.is_block_device() {
            return "a block device";
        }
    }
    "not a regular file"
}

/// What hwloc would build from a synthetic description, as far as the
/// limits need it. Counts saturate at `u64::MAX`.
#[derive(Debug, Default, PartialEq, Eq)]
struct SyntheticSize {
    /// The product of the level counts.
    pus: u64,
    /// The sum of the level widths, the root and attached memory objects.
    objects: u64,
    /// Why hwsched refuses what hwloc would accept and then abort on (an
    /// assertion of libhwloc, in release builds too): the first found.
    refused: Option<String>,
}

/// Refuses a description over the limits documented on
/// [`TopologySource::Synthetic`].
fn check_synthetic_size(desc: &str) -> Result<(), String> {
    let size = synthetic_size(desc);
    let count = |n: u64| {
        if n == u64::MAX {
            "more than 2^64".to_owned()
        } else {
            n.to_string()
        }
    };
    if size.pus > MAX_PUS as u64 {
        return Err(format!(
            "it describes {} PUs, more than the limit of {MAX_PUS} \
             (hwsched::topology::MAX_PUS)",
            count(size.pus)
        ));
    }
    if size.objects > MAX_SYNTHETIC_OBJECTS {
        return Err(format!(
            "it describes {} objects, more than the limit of {MAX_SYNTHETIC_OBJECTS} \
             (hwsched::topology::MAX_SYNTHETIC_OBJECTS)",
            count(size.objects)
        ));
    }
    match size.refused {
        Some(reason) => Err(reason),
        None => Ok(()),
    }
}

/// Scans a synthetic description the way hwloc's parser does (levels
/// `type:count` or `count`, counts read by `strtoul(.., 0)`, `(attributes)`
/// after a count, `[numa]` attached objects, levels separated by spaces or
/// newlines) and sums what it would build. Where hwloc would reject the
/// description, the scan stops: hwloc reports the error.
fn synthetic_size(desc: &str) -> SyntheticSize {
    let b = desc.as_bytes();
    let find = |from: usize, c: u8| {
        b[from.min(b.len())..]
            .iter()
            .position(|&x| x == c)
            .map(|i| from + i)
    };
    let mut size = SyntheticSize {
        pus: 1,
        objects: 1,
        refused: None,
    };
    let refuse = |size: &mut SyntheticSize, reason: String| {
        size.refused.get_or_insert(reason);
    };
    // `indexes=` values: explicit lists of distinct numbers below MAX_PUS
    // (hwloc sets a bit per index in every object's bitmaps, and a NUMA
    // index given twice fails its consistency check); no interleavings
    // (`pu:core:pack`, `2*4:1*2`): some make hwloc fail an assertion.
    let scan_attrs = |attrs: &[u8], size: &mut SyntheticSize| {
        for attr in attrs.split(|&c| c == b' ') {
            let Some(list) = attr.strip_prefix(b"indexes=") else {
                continue;
            };
            let text = String::from_utf8_lossy(list);
            if !list.iter().all(|c| c.is_ascii_digit() || *c == b',') {
                refuse(
                    size,
                    format!(
                        "its indexes={text} is an interleaving; only explicit lists are accepted"
                    ),
                );
                continue;
            }
            let mut seen: Vec<u64> = Vec::new();
            for n in list.split(|&c| c == b',').filter(|n| !n.is_empty()) {
                let v = n.iter().fold(0u64, |v, d| {
                    v.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                if v >= MAX_PUS as u64 {
                    refuse(
                        size,
                        format!(
                            "its indexes= list has the index {}, the limit is below {MAX_PUS} \
                             (hwsched::topology::MAX_PUS)",
                            String::from_utf8_lossy(n)
                        ),
                    );
                } else if seen.contains(&v) {
                    refuse(
                        size,
                        format!("its indexes={text} list repeats the index {v}"),
                    );
                } else {
                    seen.push(v);
                }
            }
        }
    };
    let mut pos = 0;
    if b.first() == Some(&b'(') {
        let Some(close) = find(1, b')') else {
            return size;
        };
        scan_attrs(&b[1..close], &mut size);
        pos = close + 1;
    }
    loop {
        while pos < b.len() && (b[pos] == b' ' || b[pos] == b'\n') {
            pos += 1;
        }
        if pos >= b.len() {
            break;
        }
        if b[pos] == b'[' {
            // One attached memory object per object of the level above.
            let Some(close) = find(pos, b']') else {
                break;
            };
            if let Some(open) = find(pos, b'(').filter(|&o| o < close) {
                let end = find(open, b')').unwrap_or(b.len());
                scan_attrs(&b[open + 1..end], &mut size);
            }
            size.objects = size.objects.saturating_add(size.pus);
            pos = close + 1;
            continue;
        }
        if !b[pos].is_ascii_digit() {
            if type_match(&b[pos..], b"memcache", 5)
                || type_match(&b[pos..], b"memory-side cache", 8)
            {
                refuse(
                    &mut size,
                    "it has a memory-side cache level (memcache), which hwloc cannot \
                     build from a synthetic description"
                        .into(),
                );
            }
            let Some(colon) = find(pos, b':') else {
                break;
            };
            pos = colon + 1;
        }
        let (count, end) = strtoul(b, pos);
        if end == pos || count == 0 {
            break;
        }
        size.pus = size.pus.saturating_mul(count);
        size.objects = size.objects.saturating_add(size.pus);
        pos = end;
        if b.get(pos) == Some(&b'(') {
            let Some(close) = find(pos, b')') else {
                break;
            };
            scan_attrs(&b[pos + 1..close], &mut size);
            pos = close + 1;
        }
    }
    size
}

/// hwloc's `hwloc__type_match`: whether `s` starts with at least `min`
/// characters of `ty` (letters in either case), followed by the end or a
/// character that is not a letter or a dash.
fn type_match(s: &[u8], ty: &[u8], min: usize) -> bool {
    for (i, &c) in s.iter().enumerate() {
        let t = ty.get(i).copied().unwrap_or(0);
        if c != t && c != t.to_ascii_uppercase() {
            return !(c.is_ascii_alphabetic() || c == b'-') && i >= min;
        }
    }
    s.len() >= min
}

/// C's `strtoul(s + start, &end, 0)`: leading white space, a sign, then a
/// hexadecimal (`0x`), octal (`0`) or decimal number; `u64::MAX` on
/// overflow, a negated value wraps. Returns the value and the end index
/// (`start` if nothing was read).
fn strtoul(b: &[u8], start: usize) -> (u64, usize) {
    let mut i = start;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let negative = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let hex_digit = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_hexdigit());
    let (radix, from) = if b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && hex_digit(b.get(i + 2))
    {
        (16, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let mut value: u64 = 0;
    let mut overflow = false;
    let mut end = from;
    while let Some(d) = b.get(end).and_then(|&c| (c as char).to_digit(radix)) {
        match value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        end += 1;
    }
    if end == from {
        return (0, start);
    }
    if overflow {
        (u64::MAX, end)
    } else if negative {
        (value.wrapping_neg(), end)
    } else {
        (value, end)
    }
}

/// Exports the hwloc topology of `source` as an XML string, the format
/// `TopologySource::Xml` loads (`lstopo file.xml` writes the same format).
///
/// ```
/// let xml = hwsched::topology::export_xml(
///     &hwsched::TopologySource::Synthetic("core:2 pu:2".into()),
/// )?;
/// assert!(xml.contains("<topology"));
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn export_xml(source: &TopologySource) -> Result<String, BuildError> {
    let topo = load(source)?;
    let xml = topo
        .export_xml(XMLExportFlags::empty())
        .map_err(|e| BuildError::Hwloc(e.to_string()))?;
    Ok(xml.as_str().to_owned())
}

/// One PU before workers are chosen.
struct Pu<'t> {
    obj: &'t TopologyObject,
    /// Identity of the object of each [`LevelKind`] containing this PU.
    keys: [Option<u64>; 5],
    /// Sibling ranks from the PU up to the root: sorting by this spreads a
    /// subset over cores first, then over every level above (round-robin).
    spread: Vec<usize>,
}

fn ancestor_key(pu: &TopologyObject, ty: ObjectType) -> Option<u64> {
    pu.ancestors()
        .find(|a| a.object_type() == ty)
        .map(|a| a.global_persistent_index())
}

/// The topmost CPU data (or unified) cache above `pu`: the last-level cache.
fn llc_of(pu: &TopologyObject) -> Option<&TopologyObject> {
    pu.ancestors()
        .filter(|a| a.object_type().is_cpu_data_cache())
        .last()
}

impl Topology {
    /// Discovers `source` and chooses `workers` PUs (all allowed PUs if
    /// `None`).
    ///
    /// With fewer workers than PUs, one PU per core is taken before any SMT
    /// sibling, spread round-robin over packages, caches and cores, and the
    /// chosen PUs keep hwloc's logical order so spans stay contiguous.
    pub fn new(source: &TopologySource, workers: Option<usize>) -> Result<Topology, BuildError> {
        Topology::with_cpus(source, workers, None)
    }

    /// Like [`Topology::new`], restricted to the PUs whose OS indices are in
    /// `cpus` (when given).
    pub fn with_cpus(
        source: &TopologySource,
        workers: Option<usize>,
        cpus: Option<&[usize]>,
    ) -> Result<Topology, BuildError> {
        if workers == Some(0) {
            return Err(BuildError::ZeroWorkers);
        }
        let hw = load(source)?;
        let is_system = matches!(source, TopologySource::System);
        let allowed = hw.allowed_cpuset();
        // The process's affinity mask: hwloc's allowed set may be wider than
        // what sched_getaffinity lets this process use.
        let affinity: Option<Vec<usize>> = if is_system {
            super::pin::current_affinity()
        } else {
            None
        };
        let numa: Vec<(u64, hwlocality::cpu::cpuset::CpuSet)> = hw
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|n| {
                n.cpuset()
                    .map(|c| (n.global_persistent_index(), c.clone_target()))
            })
            .collect();

        let mut pus: Vec<Pu<'_>> = Vec::new();
        for obj in hw.objects_with_type(ObjectType::PU) {
            let Some(os) = obj.os_index() else { continue };
            if is_system && !allowed.is_set(os) {
                continue;
            }
            if let Some(aff) = &affinity {
                if !aff.contains(&os) {
                    continue;
                }
            }
            let keys = [
                Some(ancestor_key(obj, ObjectType::Core).unwrap_or(obj.global_persistent_index())),
                llc_of(obj).map(|c| c.global_persistent_index()),
                numa.iter().find(|(_, set)| set.is_set(os)).map(|(k, _)| *k),
                ancestor_key(obj, ObjectType::Package),
                Some(0),
            ];
            let spread = std::iter::once(obj)
                .chain(obj.ancestors())
                .map(|o| o.sibling_rank())
                .collect();
            pus.push(Pu { obj, keys, spread });
        }
        let total_pus = pus.len();
        if let Some(cpus) = cpus {
            if cpus.is_empty() {
                return Err(BuildError::EmptyCpuset {
                    context: "cpus([]) was given an empty list".into(),
                });
            }
            let available: Vec<usize> = pus.iter().filter_map(|p| p.obj.os_index()).collect();
            for &c in cpus {
                if !available.contains(&c) {
                    return Err(BuildError::CpuOutsideTopology { cpu: c, available });
                }
            }
            pus.retain(|p| p.obj.os_index().is_some_and(|os| cpus.contains(&os)));
        }
        if pus.is_empty() {
            return Err(BuildError::EmptyCpuset {
                context: format!("{} has no allowed PU for this process", describe(source)),
            });
        }
        let available = pus.len();
        let n = workers.unwrap_or(available);
        if n > available {
            return Err(BuildError::TooManyWorkers {
                requested: n,
                available,
            });
        }
        if n < available {
            // Choose: SMT rank first, then core rank, then every level above,
            // so the first picks are one PU per core spread over packages.
            let mut order: Vec<usize> = (0..pus.len()).collect();
            order.sort_by(|&a, &b| pus[a].spread.cmp(&pus[b].spread).then(a.cmp(&b)));
            let mut keep = vec![false; pus.len()];
            for &i in order.iter().take(n) {
                keep[i] = true;
            }
            let mut i = 0;
            pus.retain(|_| {
                let k = keep[i];
                i += 1;
                k
            });
        }

        let keys: Vec<[Option<u64>; 5]> = pus.iter().map(|p| p.keys).collect();
        let cache = |span: &Range<usize>| -> (bool, Option<u64>) {
            let first = pus[span.start].obj;
            let last = pus[span.end - 1].obj;
            let Some(common) = first.first_common_ancestor(last) else {
                return (false, None);
            };
            let found = std::iter::once(common)
                .chain(common.ancestors())
                .find(|o| o.object_type().is_cpu_data_cache());
            match found {
                Some(c) => {
                    let size = match c.attributes() {
                        Some(hwlocality::object::attributes::ObjectAttributes::Cache(a)) => {
                            a.size().map(|s| s.get())
                        }
                        _ => None,
                    };
                    (true, size)
                }
                None => (false, None),
            }
        };
        let levels = build_levels(&keys, &cache);
        let places = pus
            .iter()
            .zip(levels)
            .map(|(p, levels)| WorkerPlace {
                os_index: p.obj.os_index().unwrap_or(0),
                logical_index: p.obj.logical_index(),
                levels,
            })
            .collect();
        Ok(Topology {
            description: describe(source),
            is_system,
            total_pus,
            places,
        })
    }
}

fn describe(source: &TopologySource) -> String {
    match source {
        TopologySource::System => "system".to_owned(),
        TopologySource::Synthetic(d) => format!("synthetic {d:?}"),
        TopologySource::Xml(p) => format!("xml {}", p.display()),
    }
}

// Compile-time check that the public types can cross threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Topology>();
    assert_send_sync::<LevelKind>();
};

#[cfg(test)]
mod tests {
    use super::*;

    fn pus(desc: &str) -> u64 {
        synthetic_size(desc).pus
    }

    #[test]
    fn synthetic_size_follows_hwlocs_parser() {
        assert_eq!(pus("pack:2 l3:2 core:4 pu:2"), 32);
        assert_eq!(pus("2 3"), 6);
        assert_eq!(pus("pack:0x10 pu:010"), 128);
        assert_eq!(pus("pack: 3 pu:+2"), 6);
        assert_eq!(pus("pack:2(memory=1GB) [numa(memory=2GB)] core:2\npu:2"), 8);
        assert_eq!(pus("(memory=1GB) pu:3"), 3);
        assert_eq!(pus("pack:100000 pu:100000"), 10_000_000_000);
        assert_eq!(pus("pack:99999999999999999999999 pu:2"), u64::MAX);
        // hwloc stops (and rejects) at a zero or missing count.
        assert_eq!(pus("pack:0 pu:100000"), 1);
        let size = synthetic_size("pack:2 [numa] [numa] core:2 pu:2");
        assert_eq!((size.pus, size.objects), (8, 1 + 2 + 2 + 2 + 4 + 8));
    }

    #[test]
    fn synthetic_checks_name_the_limit() {
        let too_many = check_synthetic_size("pack:100000 pu:100000").unwrap_err();
        assert!(
            too_many.contains("10000000000 PUs") && too_many.contains("4096"),
            "{too_many}"
        );
        let objects = check_synthetic_size(&format!("pu:1024{}", " [numa]".repeat(8))).unwrap_err();
        assert!(objects.contains("objects"), "{objects}");
        for bad in [
            "memcache:2 pu:2",
            "pu:2(indexes=0,4096)",
            "pu:2(indexes=1,1)",
            "core:2 pu:2(indexes=core:pu)",
            "pu:4(indexes=2*2:1*2)",
        ] {
            assert!(check_synthetic_size(bad).is_err(), "{bad}");
        }
        for good in [
            "pack:2 core:2 pu:2",
            "pu:2(indexes=1,0)",
            "machine:2 pu:2",
            "pu:4096",
        ] {
            assert_eq!(check_synthetic_size(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn strtoul_reads_like_c() {
        assert_eq!(strtoul(b"42x", 0), (42, 2));
        assert_eq!(strtoul(b"0x1fz", 0), (31, 4));
        assert_eq!(strtoul(b"0x", 0), (0, 1));
        assert_eq!(strtoul(b"017", 0), (15, 3));
        assert_eq!(strtoul(b" \t-1", 0), (u64::MAX, 4));
        assert_eq!(strtoul(b"x", 0), (0, 0));
        assert_eq!(strtoul(b"99999999999999999999", 0), (u64::MAX, 20));
    }
}
