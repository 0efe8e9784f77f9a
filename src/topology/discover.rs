//! hwloc discovery: from a [`TopologySource`] to a [`Topology`].

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::Topology as HwTopology;

use super::domain::{
    build_levels, LevelKind, Topology, WorkerPlace, CAPACITY_SCALE, MAX_NUMA_GROUP_LEVELS,
};
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

/// One key per worker for one slot (`None`: no object of that kind).
type Keys = Vec<Option<u64>>;
/// The runs of a [`Keys`]: `(end, has a key)` of each, in worker order.
type Runs = Vec<(usize, bool)>;

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

/// Whether every run of `finer` lies inside one run of `coarser`: every
/// boundary of `coarser` is one of `finer`.
fn refines(finer: &[(usize, bool)], coarser: &[(usize, bool)]) -> bool {
    coarser
        .iter()
        .all(|(end, _)| finer.iter().any(|(e, _)| e == end))
}

/// The groupings of the workers' NUMA nodes by distance: for each distinct
/// distance (smallest first), the nodes joined by distances up to it (the
/// closure: the kernel's `sched_init_numa` levels, whose overlapping
/// spans a range cannot hold, made a partition). One key vector per
/// grouping that differs from the previous, not counting the final one
/// (all nodes: the machine).
fn distance_groupings(nodes: &[Option<u32>], dist: &NumaDistances) -> Vec<Vec<Option<u64>>> {
    let mut ids: Vec<u32> = nodes.iter().flatten().copied().collect();
    ids.sort_unstable();
    ids.dedup();
    // Each node's position in the matrix (nodes missing from it get no
    // edge, and stay alone).
    let index: std::collections::HashMap<u32, usize> = dist
        .nodes
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i))
        .collect();
    let at: Vec<Option<usize>> = ids.iter().map(|n| index.get(n).copied()).collect();
    let mut edges: Vec<(u64, usize, usize)> = Vec::new();
    for i in 0..ids.len() {
        for j in i + 1..ids.len() {
            let (Some(a), Some(b)) = (at[i], at[j]) else {
                continue;
            };
            if let (Some(x), Some(y)) = (dist.at(a, b), dist.at(b, a)) {
                edges.push((x.max(y), i, j));
            }
        }
    }
    edges.sort_unstable();
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut components = ids.len();
    let mut out = Vec::new();
    let mut e = 0;
    while e < edges.len() && components > 1 {
        let d = edges[e].0;
        let before = components;
        while e < edges.len() && edges[e].0 == d {
            let (a, b) = (root(&mut parent, edges[e].1), root(&mut parent, edges[e].2));
            if a != b {
                parent[a.max(b)] = a.min(b);
                components -= 1;
            }
            e += 1;
        }
        if components < before && components > 1 {
            let keys = nodes
                .iter()
                .map(|n| {
                    let i = ids.binary_search(&(*n)?).ok()?;
                    Some(root(&mut parent, i) as u64)
                })
                .collect();
            out.push(keys);
        }
    }
    out
}

/// The NUMA group slots: groupings of the workers from the distance
/// matrix and from hwloc `Group` objects above their NUMA nodes, finest
/// first, each strictly coarser than the NUMA nodes and the one before,
/// none equal to the packages' or the machine, at most
/// [`MAX_NUMA_GROUP_LEVELS`].
fn numa_groupings(pus: &[Pu<'_>], extras: &Extras) -> Vec<Vec<Option<u64>>> {
    let mut cands: Vec<Vec<Option<u64>>> = Vec::new();
    if let Some(dist) = &extras.numa_distances {
        let nodes: Vec<Option<u32>> = pus.iter().map(|p| p.node).collect();
        cands.extend(distance_groupings(&nodes, dist));
    }
    // hwloc Groups holding more than the worker's NUMA node, by depth.
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
    cands.extend(by_depth.into_values());
    let column = |slot: usize| -> Vec<Option<u64>> { pus.iter().map(|p| p.keys[slot]).collect() };
    let node_runs = runs(&column(NUMA_SLOT));
    let package_runs = runs(&column(PACKAGE_SLOT));
    let mut cands: Vec<(Runs, Keys)> = cands.into_iter().map(|c| (runs(&c), c)).collect();
    // Finest first; a stable sort keeps distances before Groups.
    cands.sort_by_key(|(r, _)| std::cmp::Reverse(r.len()));
    let mut kept: Vec<(Runs, Keys)> = Vec::new();
    for (r, keys) in cands {
        let prev = kept.last().map_or(&node_runs, |(p, _)| p);
        let trivial = r.len() < 2 || r == node_runs || r == package_runs;
        if trivial || r == *prev || !refines(prev, &r) {
            continue;
        }
        kept.push((r, keys));
        if kept.len() == usize::from(MAX_NUMA_GROUP_LEVELS) {
            break;
        }
    }
    kept.into_iter().map(|(_, k)| k).collect()
}

impl Topology {
    /// Discovers `source` and chooses `workers` PUs (all allowed PUs if
    /// `None`).
    ///
    /// With fewer workers than PUs, one PU per core is taken before any SMT
    /// sibling, the most capable cores first on a hybrid machine (the
    /// kernel's asymmetric packing), spread round-robin over packages,
    /// caches and cores, and the chosen PUs keep hwloc's logical order so
    /// spans stay contiguous.
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
            let node = numa.iter().find(|(_, _, set)| set.is_set(os));
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

        let groupings = numa_groupings(&pus, &extras);
        let mut kinds: Vec<LevelKind> = FIXED_KINDS.to_vec();
        kinds.extend(
            (1..=MAX_NUMA_GROUP_LEVELS)
                .take(groupings.len())
                .map(LevelKind::NumaGroup),
        );
        let keys: Vec<Vec<Option<u64>>> = pus
            .iter()
            .enumerate()
            .map(|(w, p)| {
                let mut k = p.keys.to_vec();
                k.extend(groupings.iter().map(|g| g[w]));
                k
            })
            .collect();
        let cache = |span: &Range<usize>| -> (bool, Option<u64>) {
            let first = pus[span.start].obj;
            let last = pus[span.end - 1].obj;
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
        let levels = build_levels(&kinds, &keys, &cache);
        let llc_spans = spans_of(&pus.iter().map(|p| p.llc_span_key).collect::<Vec<_>>());
        let numa_spans = spans_of(&pus.iter().map(|p| p.keys[NUMA_SLOT]).collect::<Vec<_>>());
        let places = pus
            .iter()
            .zip(levels)
            .zip(llc_spans.into_iter().zip(numa_spans))
            .map(|((p, levels), (llc, numa))| WorkerPlace {
                os_index: p.obj.os_index().unwrap_or(0),
                logical_index: p.obj.logical_index(),
                capacity: p.capacity,
                levels,
                llc,
                numa,
            })
            .collect::<Vec<WorkerPlace>>();
        let asymmetric = places.windows(2).any(|p| p[0].capacity != p[1].capacity);
        Ok(Topology {
            description: describe(source),
            is_system,
            total_pus,
            places,
            asymmetric,
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

    fn matrix(nodes: &[u32], values: &[u64]) -> NumaDistances {
        NumaDistances {
            nodes: nodes.to_vec(),
            values: values.to_vec(),
        }
    }

    #[test]
    fn distance_groupings_close_over_each_distance() {
        // Kunpeng 920: 0-1 and 2-3 at 16, 1-2 at 25, the rest 32/33: one
        // grouping (pairs); at 25 everything is joined (the machine).
        let d = matrix(
            &[0, 1, 2, 3],
            &[
                10, 16, 32, 33, 16, 10, 25, 32, 32, 25, 10, 16, 33, 32, 16, 10,
            ],
        );
        let nodes = [Some(0), Some(0), Some(1), Some(2), Some(3), Some(3)];
        let g = distance_groupings(&nodes, &d);
        assert_eq!(g.len(), 1, "{g:?}");
        assert_eq!(runs(&g[0]), vec![(3, true), (6, true)]);
        // Asymmetric entries count as their larger value; a node missing
        // from the matrix stays alone; workers without a node have no key.
        // Here 0-2 is 20, 0-1 is 30 (not 12), 1-2 is 40: {0, 2} first, then
        // {0, 1, 2}; node 7 keeps the whole from being one group.
        let d = matrix(&[0, 1, 2], &[10, 12, 20, 30, 10, 40, 20, 40, 10]);
        let g = distance_groupings(&[Some(0), Some(1), Some(2), Some(7), None], &d);
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(g[0][0], g[0][2], "{g:?}");
        assert_ne!(g[0][0], g[0][1], "{g:?}");
        assert_eq!(g[1][0], g[1][1], "{g:?}");
        assert_eq!(g[0][3..], [Some(3), None], "{g:?}");
        // No matrix entry between the nodes: nothing to group.
        assert!(distance_groupings(&[Some(5), Some(6)], &d).is_empty());
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
        assert!(refines(&runs(&keys), &[(6, true)]));
        assert!(!refines(&[(6, true)], &runs(&keys)));
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
