//! hwloc discovery: from a [`TopologySource`] to a [`Topology`].

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::Topology as HwTopology;

use super::domain::{
    build_levels, LevelKind, NumaTopology, Topology, WorkerPlace, CAPACITY_SCALE,
    MAX_NUMA_GROUP_LEVELS,
};
use super::span::Span;
use super::xml::{Extras, NumaDistances};
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
    /// what hwsched uses is kept: the CPU and memory hierarchy, OS indices,
    /// cache attributes and the `MemorySideCache` subtype; I/O, Misc
    /// objects and infos are left out. hwsched itself reads the NUMA
    /// latency matrix (`<distances2>`, for the NUMA group levels) and the
    /// CPU kinds (`<cpukind>`, for capacities); one that does not make sense
    /// (a matrix of the wrong size, over 1024 nodes) is ignored.
    ///
    /// An export in a newer XML format than the linked hwloc 2 reads (an
    /// hwloc 3.0 `<topology version="3.0">`) is refused, saying so:
    /// re-export it with an hwloc 2.x `lstopo`.
    Xml(PathBuf),
}

/// `e` in words: the hwloc function and the error's description
/// (`hwloc_topology_load failed: Invalid argument`), not a `Debug` dump.
fn hwloc_words(e: &hwlocality::errors::RawHwlocError) -> String {
    match &e.errno {
        Some(errno) => format!("{} failed: {errno}", e.api),
        None => format!("{} failed", e.api),
    }
}

/// Loads `source` with hwloc, with the CPU kinds and NUMA distances read
/// from its XML (hwloc's own export, for a discovered machine).
fn load(source: &TopologySource) -> Result<(HwTopology, Extras), BuildError> {
    let mut extras = Extras::default();
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
            let (clean, read) = super::xml::sanitize(&text).map_err(invalid)?;
            extras = read;
            builder
                .from_xml(&clean)
                .map_err(|e| invalid(format!("hwloc rejected it ({e})")))?
        }
    };
    let topo = builder.build().map_err(|e| match source {
        TopologySource::Synthetic(desc) => BuildError::InvalidSynthetic {
            description: desc.clone(),
            reason: format!("hwloc could not build it ({})", hwloc_words(&e)),
        },
        TopologySource::Xml(path) => BuildError::InvalidXml {
            path: path.clone(),
            reason: format!("hwloc could not build it ({})", hwloc_words(&e)),
        },
        TopologySource::System => BuildError::Hwloc(hwloc_words(&e)),
    })?;
    if matches!(source, TopologySource::System) {
        // hwlocality reads CPU kinds only with hwloc >= 2.4 features
        // enabled; hwloc's XML export carries them (and the distances).
        if let Ok(xml) = topo.export_xml(XMLExportFlags::empty()) {
            extras = super::xml::read_extras(xml.as_str());
        }
    }
    Ok((topo, extras))
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
    let (topo, _) = load(source)?;
    let xml = topo
        .export_xml(XMLExportFlags::empty())
        .map_err(|e| BuildError::Hwloc(hwloc_words(&e)))?;
    Ok(xml.as_str().to_owned())
}

/// The slots of the per-worker keys given to `build_levels`: these kinds
/// (the slots named below index into them), then up to
/// [`MAX_NUMA_GROUP_LEVELS`] NUMA group levels.
const FIXED_KINDS: [LevelKind; 6] = [
    LevelKind::Smt,
    LevelKind::Cluster,
    LevelKind::Llc,
    LevelKind::Numa,
    LevelKind::Package,
    LevelKind::Machine,
];
const CORE_SLOT: usize = 0;
const NUMA_SLOT: usize = 3;
const PACKAGE_SLOT: usize = 4;

/// One PU before workers are chosen.
struct Pu<'t> {
    obj: &'t TopologyObject,
    /// Identity of the object of each of [`FIXED_KINDS`] containing this PU.
    keys: [Option<u64>; 6],
    /// The OS index of its NUMA node.
    node: Option<u32>,
    /// How many PUs its NUMA node has (`usize::MAX` without a node).
    node_weight: usize,
    /// Identity of its LLC cut at its NUMA node, or of its package cut at
    /// its node when it has no cache (the kernel's `MC` without cache
    /// information): what [`Topology::llc_span`] spans.
    llc_span_key: Option<u64>,
    /// Its capacity (see [`WorkerPlace::capacity`]).
    capacity: u32,
    /// Sibling ranks from the PU up to the root: sorting by this spreads a
    /// subset over cores first, then over every level above (round-robin).
    spread: Vec<usize>,
}

fn ancestor_key(pu: &TopologyObject, ty: ObjectType) -> Option<u64> {
    pu.ancestors()
        .find(|a| a.object_type() == ty)
        .map(|a| a.global_persistent_index())
}

/// Whether `obj` is a CPU-side data or unified cache. A memory-side cache
/// (hwloc 2 shows KNL's MCDRAM in cache mode as an L3 with the subtype
/// `MemorySideCache`) is not: it caches memory, not what the cores share.
fn is_cpu_cache(obj: &TopologyObject) -> bool {
    obj.object_type().is_cpu_data_cache()
        && obj
            .subtype()
            .is_none_or(|s| s.to_bytes() != b"MemorySideCache")
}

/// The topmost CPU data (or unified) cache above `pu`: the last-level cache.
fn llc_of(pu: &TopologyObject) -> Option<&TopologyObject> {
    pu.ancestors().filter(|a| is_cpu_cache(a)).last()
}

fn weight(obj: &TopologyObject) -> usize {
    obj.cpuset().and_then(|c| c.weight()).unwrap_or(usize::MAX)
}

/// The cluster of `pu` (the kernel's `CLS`): the smallest CPU cache or
/// `Group` above its core that holds more than the core and lies strictly
/// below `llc` (below the package when there is no cache) and below the
/// NUMA node (an object with a NUMA node attached is a node's, not a
/// cluster: hwloc's synthetic `numa:2` and sub-NUMA clusters are Groups).
fn cluster_of(pu: &TopologyObject, llc: Option<&TopologyObject>) -> Option<u64> {
    let core = pu
        .ancestors()
        .find(|a| a.object_type() == ObjectType::Core)
        .unwrap_or(pu);
    let core_weight = weight(core);
    let llc = llc.map(TopologyObject::global_persistent_index);
    for a in core.ancestors() {
        if Some(a.global_persistent_index()) == llc
            || matches!(a.object_type(), ObjectType::Package | ObjectType::Machine)
            || a.memory_arity() > 0
        {
            return None;
        }
        if weight(a) <= core_weight {
            continue;
        }
        return (is_cpu_cache(a) || a.object_type() == ObjectType::Group)
            .then(|| a.global_persistent_index());
    }
    None
}

/// Each PU's capacity from hwloc's CPU kinds, by PU OS index (`None`: the
/// machine has one kind of core, or nothing tells the kinds apart).
///
/// The kernel's `cpu_capacity` (`LinuxCapacity`) where every kind has it,
/// else the highest frequency where every kind has it, scaled so that the
/// most capable kind has [`CAPACITY_SCALE`] (the kernel's
/// `topology_normalize_cpu_scale`).
fn capacities(extras: &Extras) -> Option<std::collections::HashMap<u32, u32>> {
    let kinds = &extras.cpu_kinds;
    if kinds.len() < 2 {
        return None;
    }
    let values: Vec<u32> = if kinds.iter().all(|k| k.linux_capacity.is_some()) {
        kinds.iter().filter_map(|k| k.linux_capacity).collect()
    } else if kinds.iter().all(|k| k.max_mhz.is_some()) {
        kinds.iter().filter_map(|k| k.max_mhz).collect()
    } else {
        return None;
    };
    let max = u64::from(values.iter().copied().max()?.max(1));
    let mut out = std::collections::HashMap::new();
    for (k, v) in kinds.iter().zip(values) {
        let cap = (u64::from(v) * u64::from(CAPACITY_SCALE) / max).max(1);
        let cap = u32::try_from(cap).unwrap_or(CAPACITY_SCALE);
        for &pu in &k.pus {
            out.entry(pu).or_insert(cap);
        }
    }
    Some(out)
}

/// For each worker, the run of workers around it with its key; the worker
/// alone when it has no key or when the keys are not contiguous (an object
/// split by another: possible only in odd XML files).
fn spans_of(keys: &[Option<u64>]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = (0..keys.len()).map(|w| w..w + 1).collect();
    let mut seen = std::collections::HashSet::new();
    let mut start = 0;
    for (end, has_key) in runs(keys) {
        if has_key {
            if !seen.insert(keys[start]) {
                return (0..keys.len()).map(|w| w..w + 1).collect();
            }
            out[start..end].fill(start..end);
        }
        start = end;
    }
    out
}

/// The runs of equal keys in worker order: `(end, has a key)` of each.
fn runs(keys: &[Option<u64>]) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if i + 1 == keys.len() || keys[i + 1] != *k {
            out.push((i + 1, k.is_some()));
        }
    }
    out
}

/// For each worker, the span of the workers with its key (`None`: no key):
/// a range where they are contiguous, as hwloc's logical order makes them.
fn key_spans(keys: &[Option<u64>]) -> Vec<Option<Span>> {
    let mut members: std::collections::HashMap<u64, Vec<usize>> = Default::default();
    for (w, k) in keys.iter().enumerate() {
        if let Some(k) = k {
            members.entry(*k).or_default().push(w);
        }
    }
    let spans: std::collections::HashMap<u64, Span> = members
        .into_iter()
        .map(|(k, ws)| (k, Span::from_workers(ws)))
        .collect();
    keys.iter().map(|k| k.map(|k| spans[&k].clone())).collect()
}

/// The kernel's NUMA levels (`sched_init_numa`) from hwloc's NUMA latency
/// matrix: the nodes that have CPUs (the kernel's `N_CPU` nodes; CPU-less
/// memory nodes do not count) and the distances between them.
struct NumaLevels {
    /// OS indices of the nodes with CPUs, in hwloc's order.
    nodes: Vec<u32>,
    /// `matrix[a][b]`: the distance from node `a` to node `b` (the kernel's
    /// `node_distance(a, b)`, its row for a CPU on `a`); `None` without a
    /// matrix covering every node with CPUs.
    matrix: Option<Vec<Vec<u64>>>,
    /// The distinct distances, smallest first (the kernel's
    /// `sched_domains_numa_distance`).
    distances: Vec<u64>,
}

impl NumaLevels {
    /// From the OS indices of the nodes with CPUs and hwloc's matrix.
    fn new(nodes: Vec<u32>, dist: Option<&NumaDistances>) -> NumaLevels {
        let matrix = dist.and_then(|d| {
            let at: Vec<usize> = nodes
                .iter()
                .map(|os| d.nodes.iter().position(|n| n == os))
                .collect::<Option<Vec<usize>>>()?;
            at.iter()
                .map(|&a| at.iter().map(|&b| d.at(a, b)).collect::<Option<Vec<u64>>>())
                .collect::<Option<Vec<Vec<u64>>>>()
        });
        let mut distances: Vec<u64> = matrix.iter().flatten().flatten().copied().collect();
        distances.sort_unstable();
        distances.dedup();
        NumaLevels {
            nodes,
            matrix,
            distances,
        }
    }

    /// The position of the node with OS index `os` among the nodes with CPUs.
    fn index_of(&self, os: u32) -> Option<usize> {
        self.nodes.iter().position(|&n| n == os)
    }

    /// For each worker (on the node `node_of[w]`, a position among the
    /// nodes with CPUs), its NUMA levels: for the `k`-th distance `d` (from
    /// 0, the local one: the kernel's `NODE` level, kind
    /// [`LevelKind::Numa`]; then [`LevelKind::NumaGroup`]`(k)`), the
    /// workers of every node within `d` of its node. `None` without a
    /// matrix or for a worker without a node. Distances past
    /// [`MAX_NUMA_GROUP_LEVELS`] are left out (the machine level is always
    /// there).
    fn spans(&self, node_of: &[Option<usize>]) -> Vec<Option<Vec<(LevelKind, Span)>>> {
        let Some(m) = &self.matrix else {
            return vec![None; node_of.len()];
        };
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (w, node) in node_of.iter().enumerate() {
            if let Some(a) = node {
                members[*a].push(w);
            }
        }
        let levels = self
            .distances
            .len()
            .min(usize::from(MAX_NUMA_GROUP_LEVELS) + 1);
        let per_node: Vec<Vec<(LevelKind, Span)>> = (0..self.nodes.len())
            .map(|a| {
                (0..levels)
                    .map(|k| {
                        let d = self.distances[k];
                        let span = Span::from_workers(
                            (0..self.nodes.len())
                                .filter(|&b| m[a][b] <= d)
                                .flat_map(|b| members[b].iter().copied()),
                        );
                        let kind = match u8::try_from(k) {
                            Ok(0) => LevelKind::Numa,
                            Ok(k) => LevelKind::NumaGroup(k),
                            Err(_) => LevelKind::Machine,
                        };
                        (kind, span)
                    })
                    .filter(|(_, span)| !span.is_empty())
                    .collect()
            })
            .collect();
        node_of
            .iter()
            .map(|node| node.map(|a| per_node[a].clone()))
            .collect()
    }

    /// The kernel's `init_numa_topology_type`: at most one distance past
    /// the local one is direct; otherwise two nodes at the largest distance
    /// with a node nearer to both make a glueless mesh, without one a
    /// backplane.
    fn kind(&self) -> NumaTopology {
        let Some(m) = &self.matrix else {
            return NumaTopology::Direct;
        };
        let Some(&max) = self.distances.last() else {
            return NumaTopology::Direct;
        };
        if self.distances.len() <= 2 {
            return NumaTopology::Direct;
        }
        let n = m.len();
        for a in 0..n {
            for b in 0..n {
                if m[a][b] < max {
                    continue;
                }
                if (0..n).any(|c| m[a][c] < max && m[b][c] < max) {
                    return NumaTopology::GluelessMesh;
                }
                return NumaTopology::Backplane;
            }
        }
        NumaTopology::Direct
    }
}

/// Per depth of hwloc `Group`s holding more than a worker's NUMA node, the
/// span of each worker's Group at that depth (used only without a latency
/// matrix: hwloc made them from distances, or the machine's firmware
/// reports them), kinds [`LevelKind::NumaGroup`] by depth, outermost last.
fn groups_above_nodes(pus: &[Pu<'_>]) -> Vec<Vec<Option<(LevelKind, Span)>>> {
    let mut by_depth: std::collections::BTreeMap<usize, Vec<Option<u64>>> = Default::default();
    for (i, p) in pus.iter().enumerate() {
        for a in p.obj.ancestors() {
            if a.object_type() == ObjectType::Group && weight(a) > p.node_weight {
                let slot = by_depth
                    .entry(a.ancestors().count())
                    .or_insert_with(|| vec![None; pus.len()]);
                slot[i] = Some(a.global_persistent_index());
            }
        }
    }
    by_depth
        .into_values()
        .rev()
        .take(usize::from(MAX_NUMA_GROUP_LEVELS))
        .enumerate()
        .map(|(i, keys)| {
            let kind = LevelKind::NumaGroup(u8::try_from(i + 1).unwrap_or(MAX_NUMA_GROUP_LEVELS));
            key_spans(&keys)
                .into_iter()
                .map(|s| s.map(|s| (kind, s)))
                .collect()
        })
        .collect()
}

impl Topology {
    /// Discovers `source` and chooses `workers` PUs (all allowed PUs if
    /// `None`).
    ///
    /// With fewer workers than PUs, one PU per core is taken before any SMT
    /// sibling, the most capable cores first on a hybrid machine (the
    /// kernel's asymmetric packing), spread round-robin over packages,
    /// caches and cores, and the chosen PUs keep hwloc's logical order so
    /// that cores, caches, nodes and packages stay contiguous ranges of
    /// workers (the kernel's NUMA levels may still be bitmaps: see
    /// [`Span`](crate::Span)).
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
        let (hw, extras) = load(source)?;
        let is_system = matches!(source, TopologySource::System);
        let allowed = hw.allowed_cpuset();
        // The process's affinity mask: hwloc's allowed set may be wider than
        // what sched_getaffinity lets this process use.
        let affinity: Option<Vec<usize>> = if is_system {
            super::pin::current_affinity()
        } else {
            None
        };
        let numa: Vec<(u64, u32, hwlocality::cpu::cpuset::CpuSet)> = hw
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|n| {
                let os = u32::try_from(n.os_index()?).ok()?;
                n.cpuset()
                    .map(|c| (n.global_persistent_index(), os, c.clone_target()))
            })
            .collect();
        let capacity_of = capacities(&extras);
        // The LLC (or the package, without cache information) cut at the
        // NUMA node: one dense key per (object, node) pair.
        let mut llc_ids: std::collections::HashMap<(u64, Option<u64>), u64> = Default::default();

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
            // Its node: the nearest of the nodes whose locality holds it
            // (hwloc attaches a CPU-less memory node, such as a memory
            // tier or a GPU's memory, above several CPU nodes: its cpuset
            // is theirs).
            let node = numa
                .iter()
                .filter(|(_, _, set)| set.is_set(os))
                .min_by_key(|(_, _, set)| set.weight().unwrap_or(usize::MAX));
            let numa_key = node.map(|(k, _, _)| *k);
            let llc = llc_of(obj);
            let package = ancestor_key(obj, ObjectType::Package);
            let llc_span_key = llc
                .map(TopologyObject::global_persistent_index)
                .or(package)
                .map(|k| {
                    let next = llc_ids.len() as u64;
                    *llc_ids.entry((k, numa_key)).or_insert(next)
                });
            let keys = [
                Some(ancestor_key(obj, ObjectType::Core).unwrap_or(obj.global_persistent_index())),
                cluster_of(obj, llc),
                // A level only for a real cache: the package fallback is
                // the package or NUMA level already (or their intersection).
                llc_span_key.filter(|_| llc.is_some()),
                numa_key,
                package,
                Some(0),
            ];
            let capacity = capacity_of
                .as_ref()
                .zip(u32::try_from(os).ok())
                .and_then(|(caps, os)| caps.get(&os).copied())
                .unwrap_or(CAPACITY_SCALE);
            let spread = std::iter::once(obj)
                .chain(obj.ancestors())
                .map(|o| o.sibling_rank())
                .collect();
            pus.push(Pu {
                obj,
                keys,
                node: node.map(|(_, os, _)| *os),
                node_weight: node
                    .and_then(|(_, _, set)| set.weight())
                    .unwrap_or(usize::MAX),
                llc_span_key,
                capacity,
                spread,
            });
        }
        let total_pus = pus.len();
        // The nodes with CPUs (the kernel's `N_CPU` nodes), in hwloc's
        // order: hwloc gives a CPU-less node the CPUs near it as its
        // cpuset, so a node counts when it is some PU's node.
        let cpu_nodes: Vec<u32> = numa
            .iter()
            .map(|(_, os, _)| *os)
            .filter(|os| pus.iter().any(|p| p.node == Some(*os)))
            .collect();
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
            // Choose: SMT rank first, then the most capable cores, then core
            // rank and every level above, so the first picks are one PU per
            // core, big cores before little ones, spread over packages.
            let mut order: Vec<usize> = (0..pus.len()).collect();
            let key = |i: usize| {
                let p = &pus[i];
                (
                    p.spread.first().copied(),
                    std::cmp::Reverse(p.capacity),
                    p.spread.get(1..).unwrap_or(&[]),
                )
            };
            order.sort_by(|&a, &b| key(a).cmp(&key(b)).then(a.cmp(&b)));
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

        let numa_levels = NumaLevels::new(cpu_nodes, extras.numa_distances.as_ref());
        let n = pus.len();
        let slot_spans: Vec<Vec<Option<Span>>> = (0..FIXED_KINDS.len())
            .map(|slot| key_spans(&pus.iter().map(|p| p.keys[slot]).collect::<Vec<_>>()))
            .collect();
        // With a latency matrix the package is cut at the node (the
        // kernel's PKG level is the node's CPUs) and the NUMA levels come
        // from the matrix alone; without one, hwloc's packages and Groups
        // above the nodes stand for the distances.
        let mut cut_ids: std::collections::HashMap<(u64, Option<u64>), u64> = Default::default();
        let cut_packages = key_spans(
            &pus.iter()
                .map(|p| {
                    p.keys[PACKAGE_SLOT].map(|k| {
                        let next = cut_ids.len() as u64;
                        *cut_ids.entry((k, p.keys[NUMA_SLOT])).or_insert(next)
                    })
                })
                .collect::<Vec<_>>(),
        );
        let node_of: Vec<Option<usize>> = pus
            .iter()
            .map(|p| p.node.and_then(|os| numa_levels.index_of(os)))
            .collect();
        let distance_spans = numa_levels.spans(&node_of);
        let group_spans = if numa_levels.matrix.is_none() {
            groups_above_nodes(&pus)
        } else {
            Vec::new()
        };
        let cands: Vec<Vec<(LevelKind, Span)>> = (0..n)
            .map(|w| {
                let mut c: Vec<(LevelKind, Span)> = Vec::new();
                for (slot, kind) in FIXED_KINDS.iter().enumerate() {
                    let span = match *kind {
                        // A PU without a node (hwloc reports none, or its
                        // node is disallowed) keeps its whole package.
                        LevelKind::Package
                            if numa_levels.matrix.is_some() && pus[w].keys[NUMA_SLOT].is_some() =>
                        {
                            &cut_packages[w]
                        }
                        LevelKind::Numa if distance_spans[w].is_some() => continue,
                        _ => &slot_spans[slot][w],
                    };
                    if let Some(span) = span {
                        c.push((*kind, span.clone()));
                    }
                }
                if let Some(levels) = &distance_spans[w] {
                    c.extend(levels.iter().cloned());
                }
                c.extend(group_spans[..].iter().filter_map(|g| g[w].clone()));
                c
            })
            .collect();
        let cache = |span: &Span| -> (bool, Option<u64>) {
            let first = pus[span.first()].obj;
            let last = pus[span.hull().end - 1].obj;
            let Some(common) = first.first_common_ancestor(last) else {
                return (false, None);
            };
            let found = std::iter::once(common)
                .chain(common.ancestors())
                .find(|o| is_cpu_cache(o));
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
        let levels = build_levels(cands, &cache);
        let llc_spans = spans_of(&pus.iter().map(|p| p.llc_span_key).collect::<Vec<_>>());
        let numa_spans = spans_of(&pus.iter().map(|p| p.keys[NUMA_SLOT]).collect::<Vec<_>>());
        let core_spans = spans_of(&pus.iter().map(|p| p.keys[CORE_SLOT]).collect::<Vec<_>>());
        // Without package information the machine stands for the package.
        let package_spans = if pus.iter().all(|p| p.keys[PACKAGE_SLOT].is_none()) {
            vec![0..n; n]
        } else {
            spans_of(&pus.iter().map(|p| p.keys[PACKAGE_SLOT]).collect::<Vec<_>>())
        };
        let places = pus
            .iter()
            .zip(levels)
            .zip(llc_spans.into_iter().zip(numa_spans).zip(core_spans))
            .zip(package_spans)
            .map(
                |(((p, levels), ((llc, numa), core)), package)| WorkerPlace {
                    os_index: p.obj.os_index().unwrap_or(0),
                    logical_index: p.obj.logical_index(),
                    capacity: p.capacity,
                    levels,
                    llc,
                    numa,
                    core,
                    package,
                },
            )
            .collect::<Vec<WorkerPlace>>();
        let asymmetric = places.windows(2).any(|p| p[0].capacity != p[1].capacity);
        Ok(Topology {
            description: describe(source),
            is_system,
            total_pus,
            places,
            asymmetric,
            numa_topology: numa_levels.kind(),
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

    fn levels_of(nodes: &[u32], values: &[u64]) -> NumaLevels {
        NumaLevels {
            nodes: nodes.to_vec(),
            matrix: Some(values.chunks(nodes.len()).map(<[u64]>::to_vec).collect()),
            distances: {
                let mut d = values.to_vec();
                d.sort_unstable();
                d.dedup();
                d
            },
        }
    }

    #[test]
    fn numa_levels_follow_each_nodes_row() {
        // Kunpeng 920: 0-1 and 2-3 at 16, 1-2 at 25, 0-2 and 1-3 at 32,
        // 0-3 at 33. Node 0's levels: {0}, {0,1}, {0,1} (25), {0,1,2},
        // all; node 1's: {1}, {0,1}, {0,1,2}, all, all.
        let l = levels_of(
            &[0, 1, 2, 3],
            &[
                10, 16, 32, 33, 16, 10, 25, 32, 32, 25, 10, 16, 33, 32, 16, 10,
            ],
        );
        let node_of = [Some(0), Some(0), Some(1), Some(2), Some(3), None];
        let spans = l.spans(&node_of);
        let sets = |w: usize| -> Vec<Vec<usize>> {
            spans[w]
                .as_ref()
                .expect("levels")
                .iter()
                .map(|(_, s)| s.iter().collect())
                .collect()
        };
        assert_eq!(
            sets(0),
            [
                vec![0, 1],
                vec![0, 1, 2],
                vec![0, 1, 2],
                vec![0, 1, 2, 3],
                vec![0, 1, 2, 3, 4]
            ]
        );
        assert_eq!(
            sets(2),
            [
                vec![2],
                vec![0, 1, 2],
                vec![0, 1, 2, 3],
                vec![0, 1, 2, 3, 4],
                vec![0, 1, 2, 3, 4]
            ]
        );
        assert_eq!(sets(4)[2], [3, 4]);
        assert!(spans[5].is_none(), "no node, no NUMA level");
        assert_eq!(spans[0].as_ref().unwrap()[0].0, LevelKind::Numa);
        assert_eq!(spans[0].as_ref().unwrap()[1].0, LevelKind::NumaGroup(1));
        // 4 distances, and 0 and 3 (the farthest) are both nearer to 1.
        assert_eq!(l.kind(), NumaTopology::GluelessMesh);
        // Non-contiguous: nodes 0 and 2 are near, 1 is far from both.
        let l = levels_of(&[0, 1, 2], &[10, 30, 20, 30, 10, 30, 20, 30, 10]);
        let spans = l.spans(&[Some(0), Some(1), Some(2)]);
        let near = &spans[0].as_ref().unwrap()[1].1;
        assert_eq!(near.runs(), [0..1, 2..3]);
        // The two farthest (0 and 1, at 30) have no node nearer to both.
        assert_eq!(l.kind(), NumaTopology::Backplane);
        // One remote distance: direct.
        assert_eq!(
            levels_of(&[0, 1], &[10, 20, 20, 10]).kind(),
            NumaTopology::Direct
        );
    }

    #[test]
    fn capacities_follow_the_kernel_then_the_frequency() {
        use super::super::xml::CpuKind;
        let kind = |pus: &[u32], cap: Option<u32>, mhz: Option<u32>| CpuKind {
            pus: pus.to_vec(),
            linux_capacity: cap,
            max_mhz: mhz,
        };
        let caps = |kinds: Vec<CpuKind>| {
            capacities(&Extras {
                cpu_kinds: kinds,
                numa_distances: None,
            })
        };
        assert_eq!(caps(vec![kind(&[0, 1], Some(1024), None)]), None);
        let c = caps(vec![
            kind(&[0], Some(718), Some(2808)),
            kind(&[1], Some(1024), Some(3900)),
        ])
        .expect("two kinds");
        assert_eq!((c[&0], c[&1]), (718, 1024));
        let c = caps(vec![
            kind(&[0], None, Some(3900)),
            kind(&[1], None, Some(5000)),
        ])
        .expect("frequencies");
        assert_eq!((c[&0], c[&1]), (798, 1024));
        // Scaled so that the most capable is 1024.
        let c = caps(vec![
            kind(&[0], Some(256), None),
            kind(&[1], Some(512), None),
        ])
        .expect("capacities");
        assert_eq!((c[&0], c[&1]), (512, 1024));
        // Nothing tells the kinds apart.
        assert_eq!(
            caps(vec![kind(&[0], None, None), kind(&[1], None, Some(1))]),
            None
        );
    }

    #[test]
    fn runs_and_spans_follow_the_keys() {
        let keys = [Some(1), Some(1), None, Some(2), Some(2), Some(2)];
        assert_eq!(runs(&keys), vec![(2, true), (3, false), (6, true)]);
        assert_eq!(spans_of(&keys), vec![0..2, 0..2, 2..3, 3..6, 3..6, 3..6]);
        // A key split by another: every worker alone.
        let split = [Some(1), Some(2), Some(1)];
        assert_eq!(spans_of(&split), vec![0..1, 1..2, 2..3]);
        // As spans: a split key is a bitmap.
        let spans = key_spans(&split);
        assert_eq!(
            spans[0].as_ref().map(|s| s.runs().to_vec()),
            Some(vec![0..1, 2..3])
        );
        assert_eq!(key_spans(&keys)[4], Some(Span::range(3..6)));
        assert_eq!(key_spans(&keys)[2], None);
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
