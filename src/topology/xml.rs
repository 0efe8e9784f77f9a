//! The XML input check: parse hwloc's XML, check the object tree, and write
//! a consistent XML for hwloc to load.
//!
//! hwloc trusts its XML input: an object whose cpuset does not match its
//! children, a PU whose cpuset is not its OS index, a missing
//! `complete_cpuset` or a file without PUs makes it crash (a segmentation
//! fault in `hwloc_topology_load`) or fail its consistency check (an abort in
//! debug builds, where hwlocality runs `hwloc_topology_check`). So hwloc never
//! sees the input: only the tree read from it, with every set recomputed
//! from the PU and NUMA OS indices.

use super::discover::{MAX_PUS, MAX_XML_OBJECTS, MAX_XML_OS_INDEX};
use std::fmt::Write as _;

/// Deepest element nesting accepted (hwloc trees, I/O included, are
/// about 20 deep); the tree is walked recursively once parsed.
const MAX_DEPTH: usize = 64;

/// The most XML given to hwloc (libxml2 refuses a buffer over 10 MB;
/// an export of a 4096-PU machine rebuilds to a few MiB). Sets that
/// reach high OS indices make every object's bitmaps long, so a small
/// hostile file can ask for much more.
const MAX_REBUILT_BYTES: usize = 8 << 20;

/// A kept element: an `<object>` (with its `<object>` children), or a
/// top-level `<distances2>` or `<cpukind>` (with their `<indexes>`,
/// `<u64values>` and `<info>` children and text). Other elements are
/// parsed and dropped.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
    /// The text content (kept only in `<indexes>` and `<u64values>`).
    text: String,
}

/// Top-level elements kept besides `<object>`s: NUMA distances and CPU
/// kinds, read by [`extras_of`].
const EXTRA_ELEMENTS: [&str; 2] = ["distances2", "cpukind"];
/// The children kept inside [`EXTRA_ELEMENTS`].
const EXTRA_CHILDREN: [&str; 3] = ["indexes", "u64values", "info"];
/// The most [`EXTRA_ELEMENTS`] and their children kept from one file.
const MAX_EXTRA_ELEMENTS: usize = 1 << 18;
/// The most text kept from the `<indexes>` and `<u64values>` of one file
/// (a 1024-node distance matrix is about 4 MiB of text).
const MAX_EXTRA_TEXT: usize = 8 << 20;

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed document: the `<topology>` element's `version` attribute and
/// its kept children.
struct Document {
    version: Option<String>,
    top: Vec<Element>,
}

/// Parses the document and returns its root element's `<object>`,
/// `<distances2>` and `<cpukind>` children. Well-formedness is checked
/// (matching tags, quoted attributes, known entities); DTD internal
/// subsets are refused.
fn parse(text: &str) -> Result<Document, String> {
    let b = text.as_bytes();
    let at = |i: usize| format!("at byte {i}");
    let find = |from: usize, pat: &[u8]| {
        b.get(from..)
            .and_then(|rest| rest.windows(pat.len()).position(|w| w == pat))
            .map(|p| from + p)
    };
    // Open elements: name, and the element being built when it is an
    // `<object>` whose ancestors are all kept (else None: dropped).
    let mut stack: Vec<(&str, Option<Element>)> = Vec::new();
    let mut root_name: Option<&str> = None;
    let mut version: Option<String> = None;
    let mut root_done = false;
    let mut top: Vec<Element> = Vec::new();
    let mut objects = 0usize;
    let mut extra_text = 0usize;
    let mut extra_elements = 0usize;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'<' {
            let end = find(i, b"<").unwrap_or(b.len());
            if stack.is_empty() && !b[i..end].iter().all(|c| c.is_ascii_whitespace()) {
                return Err(format!("text outside the root element {}", at(i)));
            }
            if let Some((name, Some(e))) = stack.last_mut() {
                if matches!(*name, "indexes" | "u64values") && extra_text < MAX_EXTRA_TEXT {
                    extra_text += end - i;
                    // Not decoded: numbers only; anything else is ignored
                    // by `extras`.
                    e.text.push_str(&text[i..end]);
                }
            }
            i = end;
            continue;
        }
        if b[i..].starts_with(b"<?") {
            i = find(i, b"?>").ok_or_else(|| format!("unterminated <? {}", at(i)))? + 2;
        } else if b[i..].starts_with(b"<!--") {
            i = find(i + 4, b"-->").ok_or_else(|| format!("unterminated comment {}", at(i)))? + 3;
        } else if b[i..].starts_with(b"<![CDATA[") {
            if stack.is_empty() {
                return Err(format!("CDATA outside the root element {}", at(i)));
            }
            i = find(i, b"]]>").ok_or_else(|| format!("unterminated CDATA {}", at(i)))? + 3;
        } else if b[i..].starts_with(b"<!") {
            let end = find(i, b">").ok_or_else(|| format!("unterminated <! {}", at(i)))?;
            if !stack.is_empty() || root_name.is_some() {
                return Err(format!("misplaced <! {}", at(i)));
            }
            if b[i..end].contains(&b'[') {
                return Err(format!("a DTD internal subset is not supported {}", at(i)));
            }
            i = end + 1;
        } else if b[i..].starts_with(b"</") {
            let (name, mut j) =
                name_at(text, i + 2).ok_or_else(|| format!("bad end tag {}", at(i)))?;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if b.get(j) != Some(&b'>') {
                return Err(format!("bad end tag {}", at(i)));
            }
            let (open, element) = stack
                .pop()
                .ok_or_else(|| format!("end tag </{name}> without a start tag {}", at(i)))?;
            if open != name {
                return Err(format!("end tag </{name}> closes <{open}> {}", at(i)));
            }
            close(&mut stack, &mut top, element, &mut root_done);
            i = j + 1;
        } else {
            let (name, mut j) =
                name_at(text, i + 1).ok_or_else(|| format!("bad start tag {}", at(i)))?;
            let mut attrs: Vec<(String, String)> = Vec::new();
            let empty;
            loop {
                let ws = j;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                match b.get(j) {
                    Some(b'>') => {
                        empty = false;
                        j += 1;
                        break;
                    }
                    Some(b'/') if b.get(j + 1) == Some(&b'>') => {
                        empty = true;
                        j += 2;
                        break;
                    }
                    Some(_) if j > ws => {}
                    _ => return Err(format!("bad start tag <{name}> {}", at(i))),
                }
                let (attr, k) = name_at(text, j)
                    .ok_or_else(|| format!("bad attribute in <{name}> {}", at(j)))?;
                j = k;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) != Some(&b'=') {
                    return Err(format!("attribute {attr} without a value {}", at(j)));
                }
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                let quote = match b.get(j) {
                    Some(&q @ (b'"' | b'\'')) => q,
                    _ => return Err(format!("attribute {attr} is not quoted {}", at(j))),
                };
                let end = b[j + 1..]
                    .iter()
                    .position(|&c| c == quote)
                    .map(|p| j + 1 + p)
                    .ok_or_else(|| format!("unterminated attribute {attr} {}", at(j)))?;
                let value = unescape(&text[j + 1..end])
                    .ok_or_else(|| format!("bad character in attribute {attr} {}", at(j)))?;
                if attrs.iter().any(|(n, _)| n == attr) {
                    return Err(format!("attribute {attr} repeated {}", at(j)));
                }
                attrs.push((attr.to_owned(), value));
                j = end + 1;
            }
            if stack.is_empty() {
                if root_done || root_name.is_some() {
                    return Err(format!("a second root element <{name}> {}", at(i)));
                }
                if name != "topology" {
                    return Err(format!("the root element is <{name}>, not <topology>"));
                }
                root_name = Some(name);
                version = attrs
                    .iter()
                    .find(|(n, _)| n == "version")
                    .map(|(_, v)| v.clone());
            }
            if stack.len() >= MAX_DEPTH {
                return Err(format!("elements nested deeper than {MAX_DEPTH} {}", at(i)));
            }
            // Keep `<object>`s whose parent is kept or is the root, the
            // root's distances and CPU kinds, and their children.
            let parent = match stack.last() {
                Some((_, Some(p))) => Some(p.name.as_str()),
                _ => None,
            };
            let keep = match (name, parent) {
                ("object", Some("object")) => true,
                (_, Some(p)) if EXTRA_ELEMENTS.contains(&p) => EXTRA_CHILDREN.contains(&name),
                (_, Some(_)) => false,
                ("object", None) => stack.len() == 1,
                (_, None) => stack.len() == 1 && EXTRA_ELEMENTS.contains(&name),
            };
            // Distances and CPU kinds are bounded apart from the objects
            // (hwloc writes a 1024-node matrix as 100000 lines); past the
            // bound they are dropped, and `extras` ignores what is left.
            let keep = keep && (name == "object" || extra_elements < MAX_EXTRA_ELEMENTS);
            let element = if keep {
                if name == "object" {
                    objects += 1;
                } else {
                    extra_elements += 1;
                }
                if objects > 4 * MAX_XML_OBJECTS {
                    return Err(format!("more than {} objects", 4 * MAX_XML_OBJECTS));
                }
                Some(Element {
                    name: name.to_owned(),
                    attrs,
                    children: Vec::new(),
                    text: String::new(),
                })
            } else {
                None
            };
            if empty {
                if stack.is_empty() {
                    root_done = true;
                } else {
                    close(&mut stack, &mut top, element, &mut root_done);
                }
            } else {
                stack.push((name, element));
            }
            i = j;
        }
    }
    if let Some((name, _)) = stack.last() {
        return Err(format!(
            "unterminated element <{name}> (the file is truncated?)"
        ));
    }
    if root_name.is_none() {
        return Err("no <topology> element".into());
    }
    Ok(Document { version, top })
}

/// Attaches a closed element to its parent (or to the root's list).
fn close(
    stack: &mut [(&str, Option<Element>)],
    top: &mut Vec<Element>,
    element: Option<Element>,
    root_done: &mut bool,
) {
    match stack.len() {
        0 => *root_done = true,
        1 => top.extend(element),
        n => {
            if let (Some(parent), Some(e)) = (&mut stack[n - 1].1, element) {
                parent.children.push(e);
            }
        }
    }
}

/// An XML name starting at `i`, and the index after it.
fn name_at(text: &str, i: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let start_ok = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':';
    let ok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'.' | b'-');
    if !b.get(i).is_some_and(|&c| start_ok(c)) {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() && ok(b[j]) {
        j += 1;
    }
    Some((&text[i..j], j))
}

/// Decodes the five predefined entities and character references;
/// `None` for `<`, an unknown entity or a bad reference.
fn unescape(raw: &str) -> Option<String> {
    if raw.contains('<') {
        return None;
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let semi = rest[amp..].find(';')? + amp;
        let entity = &rest[amp + 1..semi];
        let c = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()?
                } else {
                    entity.strip_prefix('#')?.parse::<u32>().ok()?
                };
                char::from_u32(code).filter(|&c| c != '\0')?
            }
        };
        out.push(c);
        rest = &rest[semi + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// The normal (CPU-side) object types, in hwloc's order from the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Machine,
    Package,
    Die,
    Group,
    /// A data or unified cache of this level (1 ..= 5).
    Cache(u8),
    /// An instruction cache of this level (1 ..= 3).
    ICache(u8),
    Core,
    Pu,
}

impl Kind {
    fn parse(ty: &str) -> Option<Kind> {
        Some(match ty {
            "Machine" => Kind::Machine,
            "Package" => Kind::Package,
            "Die" => Kind::Die,
            "Group" => Kind::Group,
            "L1Cache" => Kind::Cache(1),
            "L2Cache" => Kind::Cache(2),
            "L3Cache" => Kind::Cache(3),
            "L4Cache" => Kind::Cache(4),
            "L5Cache" => Kind::Cache(5),
            "L1iCache" => Kind::ICache(1),
            "L2iCache" => Kind::ICache(2),
            "L3iCache" => Kind::ICache(3),
            "Core" => Kind::Core,
            "PU" => Kind::Pu,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Machine => "Machine",
            Kind::Package => "Package",
            Kind::Die => "Die",
            Kind::Group => "Group",
            Kind::Cache(1) => "L1Cache",
            Kind::Cache(2) => "L2Cache",
            Kind::Cache(3) => "L3Cache",
            Kind::Cache(4) => "L4Cache",
            Kind::Cache(_) => "L5Cache",
            Kind::ICache(1) => "L1iCache",
            Kind::ICache(2) => "L2iCache",
            Kind::ICache(_) => "L3iCache",
            Kind::Core => "Core",
            Kind::Pu => "PU",
        }
    }

    /// Position in hwloc's order (a child is strictly below its parent);
    /// `None` for groups, which may sit between any two levels above
    /// cores. The data and instruction caches of one level may nest
    /// either way (see [`Kind::pairs_with`]).
    fn rank(self) -> Option<u8> {
        Some(match self {
            Kind::Machine => 0,
            Kind::Package => 1,
            Kind::Die => 2,
            Kind::Group => return None,
            Kind::Cache(l) => 3 + 3 * (5 - l),
            Kind::ICache(l) => 4 + 3 * (5 - l),
            Kind::Core => 18,
            Kind::Pu => 19,
        })
    }

    /// Whether `self` may sit inside `parent` although its rank is not
    /// below it: the data (or unified) and the instruction cache of one
    /// level, either inside the other. hwloc orders objects by their
    /// cpusets and uses its type order (`obj_type_order`: L1 above L1i)
    /// only between equal cpusets, so an instruction cache shared by the
    /// cores of a module (AMD Bulldozer's L1i) sits above their own L1d
    /// caches. The rank below both ([`Kind::pair_rank`]) then applies to
    /// what is inside, so the pair nests once.
    fn pairs_with(self, parent: Kind) -> bool {
        matches!((self, parent), (Kind::Cache(a), Kind::ICache(b)) | (Kind::ICache(a), Kind::Cache(b)) if a == b)
    }

    /// The rank of a data and instruction cache pair of one level, one
    /// inside the other: below both, above the next level's caches.
    fn pair_rank(self) -> Option<u8> {
        match self {
            Kind::Cache(l) | Kind::ICache(l) => Some(5 + 3 * (5 - l)),
            _ => None,
        }
    }
}

/// Cache attributes, as hwloc's XML names them.
#[derive(Debug, Default)]
struct Cache {
    size: u64,
    linesize: u32,
    associativity: i32,
    /// 0 unified, 1 data, 2 instruction.
    ty: u8,
    /// hwloc's `MemorySideCache` subtype: a memory-side cache (KNL's MCDRAM
    /// in cache mode) that hwloc 2 shows as a CPU cache level.
    memory_side: bool,
}

#[derive(Debug)]
struct Numa {
    os_index: u32,
    local_memory: u64,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    os_index: Option<u32>,
    cache: Option<Cache>,
    children: Vec<Node>,
    numa: Vec<Numa>,
    /// PU OS indices below (computed after pruning), sorted.
    cpus: Vec<u32>,
}

struct Counts {
    objects: usize,
    pus: usize,
}

fn os_index(e: &Element, what: &str) -> Result<u32, String> {
    let v = e
        .attr("os_index")
        .ok_or_else(|| format!("a {what} object has no os_index"))?;
    let n: u32 = v
        .trim()
        .parse()
        .map_err(|_| format!("a {what} object has the os_index {v:?}, not a number"))?;
    if n > MAX_XML_OS_INDEX {
        return Err(format!(
            "a {what} object has the os_index {n}, more than the limit of {MAX_XML_OS_INDEX} \
             (hwsched::topology::MAX_XML_OS_INDEX)"
        ));
    }
    Ok(n)
}

fn number<T: std::str::FromStr>(e: &Element, name: &str) -> Option<T> {
    e.attr(name).and_then(|v| v.trim().parse().ok())
}

fn count(counts: &mut Counts, kind: Option<Kind>) -> Result<(), String> {
    counts.objects += 1;
    if counts.objects > MAX_XML_OBJECTS {
        return Err(format!(
            "it has more than {MAX_XML_OBJECTS} objects, the limit \
             (hwsched::topology::MAX_XML_OBJECTS)"
        ));
    }
    if kind == Some(Kind::Pu) {
        counts.pus += 1;
        if counts.pus > MAX_PUS {
            return Err(format!(
                "it has more than {MAX_PUS} PUs, the limit (hwsched::topology::MAX_PUS)"
            ));
        }
    }
    Ok(())
}

/// Converts the children of an object into `children` (normal objects)
/// and `numa` (NUMA nodes, also those below memory-side caches).
/// `above` is the rank of the nearest non-group ancestor, `parent` its
/// kind (for messages).
fn convert_children(
    elements: &[Element],
    above: u8,
    parent: Kind,
    children: &mut Vec<Node>,
    numa: &mut Vec<Numa>,
    counts: &mut Counts,
) -> Result<(), String> {
    for e in elements {
        let ty = e.attr("type").ok_or("an object has no type")?;
        match ty {
            // Not used by hwsched: left out with their subtrees.
            "Bridge" | "PCIDev" | "OSDev" | "Misc" => continue,
            "NUMANode" => {
                if e.children.iter().any(|c| {
                    !matches!(c.attr("type"), Some("Misc" | "Bridge" | "PCIDev" | "OSDev"))
                }) {
                    return Err(
                        "a NUMANode object has CPU or memory children (an hwloc 1.x \
                         export? re-export it with hwloc 2)"
                            .into(),
                    );
                }
                count(counts, None)?;
                numa.push(Numa {
                    os_index: os_index(e, "NUMANode")?,
                    local_memory: number(e, "local_memory").unwrap_or(0),
                });
                continue;
            }
            "MemCache" => {
                // A memory-side cache: its NUMA nodes belong to `parent`.
                let mut none = Vec::new();
                convert_children(&e.children, u8::MAX, parent, &mut none, numa, counts)?;
                if !none.is_empty() {
                    return Err("a MemCache object has CPU children".into());
                }
                continue;
            }
            _ => {}
        }
        let kind = Kind::parse(ty).ok_or_else(|| format!("unknown object type {ty:?}"))?;
        // A cache inside the other cache of its level (L1d in L1i, or L1i
        // in L1d): what is inside takes the pair's rank, so neither kind
        // comes again.
        let paired = kind.pairs_with(parent) && parent.rank() == Some(above);
        let below_ok = match kind.rank() {
            Some(r) => r > above || paired,
            None => above < Kind::Core.rank().unwrap_or(0),
        };
        if !below_ok {
            return Err(format!(
                "a {} object is inside a {} object (not hwloc's order)",
                kind.name(),
                parent.name()
            ));
        }
        count(counts, Some(kind))?;
        let os = match kind {
            Kind::Pu => Some(os_index(e, "PU")?),
            _ => number::<u32>(e, "os_index"),
        };
        let cache = match kind {
            Kind::Cache(_) | Kind::ICache(_) => Some(Cache {
                size: number(e, "cache_size").unwrap_or(0),
                linesize: number(e, "cache_linesize").unwrap_or(0),
                associativity: number(e, "cache_associativity").unwrap_or(0),
                ty: match (kind, number::<u8>(e, "cache_type")) {
                    (Kind::ICache(_), _) => 2,
                    (_, Some(1)) => 1,
                    _ => 0,
                },
                memory_side: e.attr("subtype") == Some("MemorySideCache"),
            }),
            _ => None,
        };
        let mut node = Node {
            kind,
            os_index: os,
            cache,
            children: Vec::new(),
            numa: Vec::new(),
            cpus: Vec::new(),
        };
        let rank = if paired {
            kind.pair_rank().unwrap_or(above)
        } else {
            kind.rank().unwrap_or(above)
        };
        convert_children(
            &e.children,
            rank,
            kind,
            &mut node.children,
            &mut node.numa,
            counts,
        )?;
        if kind == Kind::Pu && !node.children.is_empty() {
            return Err(format!(
                "the PU with os_index {} has CPU children",
                node.os_index.unwrap_or(0)
            ));
        }
        children.push(node);
    }
    Ok(())
}

/// Removes PUs not in `allowed` (when given), then every CPU object left
/// without a PU (its NUMA nodes move to its parent), and fills `cpus`.
fn prune(node: &mut Node, allowed: Option<&[u32]>) {
    if node.kind == Kind::Pu {
        let os = node.os_index.unwrap_or(0);
        if allowed.is_none_or(|a| a.binary_search(&os).is_ok()) {
            node.cpus = vec![os];
        }
        return;
    }
    let mut kept = Vec::with_capacity(node.children.len());
    for mut child in std::mem::take(&mut node.children) {
        prune(&mut child, allowed);
        if child.cpus.is_empty() {
            node.numa.append(&mut child.numa);
        } else {
            node.cpus.extend_from_slice(&child.cpus);
            kept.push(child);
        }
    }
    // Children in the order of their first PU, as hwloc orders them.
    kept.sort_by_key(|c| c.cpus[0]);
    node.children = kept;
    node.cpus.sort_unstable();
}

fn collect(node: &Node, pus: &mut Vec<u32>, numa: &mut Vec<u32>) {
    if node.kind == Kind::Pu {
        pus.extend(node.os_index);
    }
    numa.extend(node.numa.iter().map(|n| n.os_index));
    for c in &node.children {
        collect(c, pus, numa);
    }
}

/// The first duplicate of a sorted list.
fn duplicate(sorted: &[u32]) -> Option<u32> {
    sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// Parses an hwloc bitmap (`0x0000000f,0xffffffff`, comma-separated
/// 32-bit words, most significant first, empty words zero, an optional
/// leading `0xf...f,` for an infinite set) into the set bits up to
/// `limit`.
fn parse_bitmap(s: &str, limit: u32) -> Option<Vec<u32>> {
    let s = s.trim();
    let (infinite, s) = match s.strip_prefix("0xf...f") {
        Some(rest) => (true, rest.strip_prefix(',').unwrap_or(rest)),
        None => (false, s),
    };
    let words: Vec<&str> = if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').collect()
    };
    let mut bits = Vec::new();
    // Words past `limit` do not matter (but must still be words).
    let relevant = limit as usize / 32 + 1;
    for (i, w) in words.iter().rev().enumerate() {
        let w = w.trim();
        if i >= relevant {
            let hex = w.strip_prefix("0x").unwrap_or(w);
            if hex.len() > 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            continue;
        }
        if w.is_empty() {
            continue;
        }
        let hex = w.strip_prefix("0x").unwrap_or(w);
        if hex.is_empty() || hex.len() > 8 {
            return None;
        }
        let v = u32::from_str_radix(hex, 16).ok()?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                let index = u32::try_from(i).ok()?.checked_mul(32)?.checked_add(bit)?;
                if index <= limit {
                    bits.push(index);
                }
            }
        }
    }
    if infinite {
        let from = u32::try_from(words.len()).ok()?.saturating_mul(32);
        bits.extend(from..=limit);
    }
    bits.sort_unstable();
    Some(bits)
}

/// hwloc's bitmap string of a sorted set of indices.
fn bitmap(bits: &[u32]) -> String {
    let Some(&last) = bits.last() else {
        return "0x0".to_owned();
    };
    let mut words = vec![0u32; last as usize / 32 + 1];
    for &b in bits {
        words[b as usize / 32] |= 1 << (b % 32);
    }
    let n = words.len();
    let mut out = String::with_capacity(n + 20);
    for (i, w) in words.iter().enumerate().rev() {
        if *w != 0 || i == 0 || i == n - 1 {
            let _ = write!(out, "0x{w:08x}");
        }
        if i > 0 {
            out.push(',');
        }
    }
    out
}

struct Writer {
    out: String,
    gp_index: u64,
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = a.iter().chain(b).copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The NUMA nodes of `node` and all its descendants, sorted.
fn nodes_below(node: &Node) -> Vec<u32> {
    let mut v: Vec<u32> = node.numa.iter().map(|n| n.os_index).collect();
    for c in &node.children {
        v.extend(nodes_below(c));
    }
    v.sort_unstable();
    v
}

/// Writes `node`; `inherited` are the NUMA nodes attached to its
/// ancestors (an object's nodeset is what is attached to it, to its
/// ancestors and below it). Stops early (returns false) when the output
/// passes [`MAX_REBUILT_BYTES`].
fn write(w: &mut Writer, node: &Node, inherited: &[u32], depth: usize) -> bool {
    if w.out.len() > MAX_REBUILT_BYTES {
        return false;
    }
    let below = nodes_below(node);
    let nodeset = bitmap(&union(inherited, &below));
    let cpuset = bitmap(&node.cpus);
    let indent = "  ".repeat(depth + 1);
    w.gp_index += 1;
    let _ = write!(w.out, "{indent}<object type=\"{}\"", node.kind.name());
    if let Some(os) = node.os_index {
        let _ = write!(w.out, " os_index=\"{os}\"");
    }
    let _ = write!(w.out, " cpuset=\"{cpuset}\" complete_cpuset=\"{cpuset}\"");
    if depth == 0 {
        let _ = write!(w.out, " allowed_cpuset=\"{cpuset}\"");
    }
    let _ = write!(
        w.out,
        " nodeset=\"{nodeset}\" complete_nodeset=\"{nodeset}\""
    );
    if depth == 0 {
        let _ = write!(w.out, " allowed_nodeset=\"{nodeset}\"");
    }
    let _ = write!(w.out, " gp_index=\"{}\"", w.gp_index);
    if let (Some(c), Kind::Cache(level) | Kind::ICache(level)) = (&node.cache, node.kind) {
        let _ = write!(
            w.out,
            " cache_size=\"{}\" depth=\"{level}\" cache_linesize=\"{}\" \
             cache_associativity=\"{}\" cache_type=\"{}\"",
            c.size, c.linesize, c.associativity, c.ty
        );
        if c.memory_side {
            w.out.push_str(" subtype=\"MemorySideCache\"");
        }
    }
    if node.kind == Kind::Pu {
        w.out.push_str("/>\n");
        return true;
    }
    w.out.push_str(">\n");
    let mut numa: Vec<&Numa> = node.numa.iter().collect();
    numa.sort_by_key(|n| n.os_index);
    for n in numa {
        w.gp_index += 1;
        let _ = writeln!(
            w.out,
            "{indent}  <object type=\"NUMANode\" os_index=\"{os}\" cpuset=\"{cpuset}\" \
             complete_cpuset=\"{cpuset}\" nodeset=\"{set}\" complete_nodeset=\"{set}\" \
             gp_index=\"{gp}\" local_memory=\"{mem}\"/>",
            os = n.os_index,
            set = bitmap(&[n.os_index]),
            gp = w.gp_index,
            mem = n.local_memory,
        );
    }
    let inherited = union(
        inherited,
        &node.numa.iter().map(|n| n.os_index).collect::<Vec<_>>(),
    );
    for c in &node.children {
        if !write(w, c, &inherited, depth + 1) {
            return false;
        }
    }
    let _ = writeln!(w.out, "{indent}</object>");
    true
}

/// Refuses an XML format newer than the linked hwloc reads: hwloc 2.x
/// imports versions 1 and 2 and fails on a 3.0 export with a bare
/// `EINVAL`; hwsched's own checks assume hwloc 2's object order too (a
/// 3.0 export may put a shared L1i cache above the L1d caches).
fn check_version(version: Option<&str>) -> Result<(), String> {
    let Some(v) = version else { return Ok(()) };
    let major = v
        .trim()
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(1 | 2) => Ok(()),
        Some(m) if m > 2 => {
            let api = hwlocality::hwloc_api_version();
            Err(format!(
                "it is an hwloc {v} XML export, and the linked hwloc (API {}.{}) reads XML \
                 versions 1 and 2 only: export it with an hwloc 2.x lstopo \
                 (lstopo-no-graphics --of xml)",
                api >> 16,
                (api >> 8) & 0xff
            ))
        }
        _ => Err(format!(
            "its <topology> has the version {v:?}, not an hwloc XML version"
        )),
    }
}

/// Checks an hwloc XML topology and returns a consistent XML of the
/// same CPU and memory hierarchy (with what [`read_extras`] reads), or why
/// it is refused.
pub(super) fn sanitize(text: &str) -> Result<(String, Extras), String> {
    let doc = parse(text)?;
    check_version(doc.version.as_deref())?;
    let objects: Vec<&Element> = doc.top.iter().filter(|e| e.name == "object").collect();
    let root = match objects.as_slice() {
        [root] => *root,
        [] => return Err("it has no object (no <object> in <topology>)".into()),
        _ => return Err("it has more than one root object".into()),
    };
    if root.attr("type") != Some("Machine") {
        return Err(format!(
            "the root object is {:?}, not a Machine (an hwloc 1.x export? re-export it \
             with hwloc 2)",
            root.attr("type").unwrap_or("untyped")
        ));
    }
    let mut counts = Counts { objects: 1, pus: 0 };
    let mut machine = Node {
        kind: Kind::Machine,
        os_index: number(root, "os_index"),
        cache: None,
        children: Vec::new(),
        numa: Vec::new(),
        cpus: Vec::new(),
    };
    convert_children(
        &root.children,
        0,
        Kind::Machine,
        &mut machine.children,
        &mut machine.numa,
        &mut counts,
    )?;
    let (mut pus, mut numa) = (Vec::new(), Vec::new());
    collect(&machine, &mut pus, &mut numa);
    pus.sort_unstable();
    numa.sort_unstable();
    if let Some(d) = duplicate(&pus) {
        return Err(format!("two PU objects have the os_index {d}"));
    }
    if let Some(d) = duplicate(&numa) {
        return Err(format!("two NUMANode objects have the os_index {d}"));
    }
    if pus.is_empty() {
        return Err("it has no PU object".into());
    }
    let allowed = match root.attr("allowed_cpuset") {
        Some(s) => Some(
            parse_bitmap(s, MAX_XML_OS_INDEX)
                .ok_or_else(|| format!("the machine's allowed_cpuset {s:?} is not a bitmap"))?,
        ),
        None => None,
    };
    prune(&mut machine, allowed.as_deref());
    if machine.cpus.is_empty() {
        return Err(format!(
            "none of its {} PUs is in the machine's allowed_cpuset",
            pus.len()
        ));
    }
    if let Some(s) = root.attr("allowed_nodeset") {
        let allowed = parse_bitmap(s, MAX_XML_OS_INDEX)
            .ok_or_else(|| format!("the machine's allowed_nodeset {s:?} is not a bitmap"))?;
        fn keep(node: &mut Node, allowed: &[u32]) {
            node.numa
                .retain(|n| allowed.binary_search(&n.os_index).is_ok());
            node.children.iter_mut().for_each(|c| keep(c, allowed));
        }
        keep(&mut machine, &allowed);
    }
    if nodes_below(&machine).is_empty() {
        // hwloc needs a NUMA node; a file without one gets one.
        machine.numa.push(Numa {
            os_index: 0,
            local_memory: 0,
        });
    }
    let mut w = Writer {
        out: String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n",
        ),
        gp_index: 0,
    };
    if !write(&mut w, &machine, &[], 0) || w.out.len() > MAX_REBUILT_BYTES {
        return Err(format!(
            "rebuilt with consistent sets it is more than {MAX_REBUILT_BYTES} bytes of XML \
             (its PU or NUMA OS indices are high and spread)"
        ));
    }
    w.out.push_str("</topology>\n");
    Ok((w.out, extras_of(&doc)))
}

/// The most CPU kinds read (hwloc reports 2 to 5 on hybrid machines);
/// further `<cpukind>`s are ignored.
const MAX_CPU_KINDS: usize = 64;

/// The most NUMA nodes of a distance matrix that is read (Linux's
/// `MAX_NUMNODES` is at most 1024); a larger matrix is ignored.
const MAX_DISTANCE_NODES: usize = 1024;

/// A CPU kind of hwloc's `cpukinds` (an XML `<cpukind>`): PUs of one core
/// type on a hybrid machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct CpuKind {
    /// The PUs' OS indices, sorted.
    pub(super) pus: Vec<u32>,
    /// The kernel's capacity of these PUs (hwloc's `LinuxCapacity` info,
    /// `/sys/devices/system/cpu/cpuN/cpu_capacity`), if known.
    pub(super) linux_capacity: Option<u32>,
    /// The highest frequency in MHz (hwloc's `FrequencyMaxMHz` info).
    pub(super) max_mhz: Option<u32>,
}

/// A NUMA latency matrix (an XML `<distances2>` of NUMA nodes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct NumaDistances {
    /// The nodes' OS indices, in matrix order.
    pub(super) nodes: Vec<u32>,
    /// Row-major: `values[i * nodes.len() + j]` from node `i` to node `j`.
    pub(super) values: Vec<u64>,
}

impl NumaDistances {
    /// The distance from the node at matrix position `i` to the one at `j`.
    pub(super) fn at(&self, i: usize, j: usize) -> Option<u64> {
        self.values.get(i * self.nodes.len() + j).copied()
    }
}

/// What hwsched reads from an XML topology besides the object tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Extras {
    pub(super) cpu_kinds: Vec<CpuKind>,
    pub(super) numa_distances: Option<NumaDistances>,
}

/// The CPU kinds and the NUMA latency matrix of an XML topology (hwloc's
/// own export, for a discovered machine); empty when the text does not
/// parse. Elements that do not make sense (a matrix of the wrong size, a
/// kind without a cpuset) are ignored.
pub(super) fn read_extras(text: &str) -> Extras {
    parse(text).map(|d| extras_of(&d)).unwrap_or_default()
}

fn numbers<T: std::str::FromStr>(e: &Element, child: &str) -> Option<Vec<T>> {
    e.children
        .iter()
        .filter(|c| c.name == child)
        .flat_map(|c| c.text.split_ascii_whitespace())
        .map(|n| n.parse().ok())
        .collect()
}

fn extras_of(doc: &Document) -> Extras {
    let mut out = Extras::default();
    for e in &doc.top {
        match e.name.as_str() {
            "cpukind" if out.cpu_kinds.len() < MAX_CPU_KINDS => {
                let Some(pus) = e
                    .attr("cpuset")
                    .and_then(|s| parse_bitmap(s, MAX_XML_OS_INDEX))
                else {
                    continue;
                };
                let info = |name: &str| {
                    e.children
                        .iter()
                        .find(|c| c.name == "info" && c.attr("name") == Some(name))
                        .and_then(|c| c.attr("value"))
                        .and_then(|v| v.trim().parse::<u32>().ok())
                        .filter(|&v| v > 0)
                };
                out.cpu_kinds.push(CpuKind {
                    pus,
                    linux_capacity: info("LinuxCapacity"),
                    max_mhz: info("FrequencyMaxMHz"),
                });
            }
            "distances2" if out.numa_distances.is_none() => {
                let latency = e
                    .attr("kind")
                    .and_then(|k| k.trim().parse::<u64>().ok())
                    .is_some_and(|k| k & 4 != 0);
                if e.attr("type") != Some("NUMANode")
                    || e.attr("indexing") != Some("os")
                    || !latency
                {
                    continue;
                }
                let n: usize = number(e, "nbobjs").unwrap_or(0);
                if n == 0 || n > MAX_DISTANCE_NODES {
                    continue;
                }
                let (Some(nodes), Some(values)) =
                    (numbers::<u32>(e, "indexes"), numbers::<u64>(e, "u64values"))
                else {
                    continue;
                };
                if nodes.len() == n && values.len() == n * n {
                    out.numa_distances = Some(NumaDistances { nodes, values });
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_round_trip() {
        for bits in [
            vec![0],
            vec![0, 1, 2, 3],
            vec![5, 100],
            vec![31, 32, 64],
            vec![1000],
        ] {
            let s = bitmap(&bits);
            assert_eq!(
                parse_bitmap(&s, MAX_XML_OS_INDEX),
                Some(bits.clone()),
                "{s}"
            );
        }
        assert_eq!(bitmap(&[4, 96]), "0x00000001,,,0x00000010");
        assert_eq!(parse_bitmap("0xf...f", 3), Some(vec![0, 1, 2, 3]));
        assert_eq!(
            parse_bitmap("0xf...f,0x00000001", 33),
            Some(vec![0, 32, 33])
        );
        assert_eq!(parse_bitmap("0xzz", 10), None);
    }

    const EXTRAS: &str = r#"<topology version="2.0">
  <object type="Machine" os_index="0">
    <object type="PU" os_index="0"/>
    <object type="PU" os_index="1"/>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="6">10 20 </u64values>
    <u64values length="6">21 10 </u64values>
  </distances2>
  <distances2 type="NUMANode" nbobjs="2" kind="9" name="NUMABandwidth" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="4">1 2 3 4</u64values>
  </distances2>
  <cpukind cpuset="0x00000001" forced_efficiency="0">
    <info name="FrequencyMaxMHz" value="2808"/>
    <info name="LinuxCapacity" value="718"/>
  </cpukind>
  <cpukind cpuset="0x00000002">
    <info name="FrequencyMaxMHz" value="3900"/>
  </cpukind>
</topology>"#;

    #[test]
    fn extras_read_the_latency_matrix_and_cpu_kinds() {
        let e = read_extras(EXTRAS);
        let d = e.numa_distances.expect("a latency matrix");
        assert_eq!(d.nodes, vec![0, 1]);
        assert_eq!(d.values, vec![10, 20, 21, 10]);
        assert_eq!(
            (d.at(0, 1), d.at(1, 0), d.at(2, 0)),
            (Some(20), Some(21), None)
        );
        assert_eq!(
            e.cpu_kinds,
            vec![
                CpuKind {
                    pus: vec![0],
                    linux_capacity: Some(718),
                    max_mhz: Some(2808)
                },
                CpuKind {
                    pus: vec![1],
                    linux_capacity: None,
                    max_mhz: Some(3900)
                },
            ]
        );
        // sanitize reads the same, and keeps none of it in hwloc's XML.
        let (clean, extras) = sanitize(EXTRAS).expect("valid");
        assert_eq!(extras, read_extras(EXTRAS));
        assert!(!clean.contains("distances2") && !clean.contains("cpukind"));
        // A matrix of the wrong size is ignored.
        let bad = EXTRAS.replace(r#"nbobjs="2" kind="5""#, r#"nbobjs="3" kind="5""#);
        assert_eq!(read_extras(&bad).numa_distances, None);
    }

    #[test]
    fn a_1024_node_matrix_in_hwlocs_lines_is_read() {
        // hwloc writes 10 values a line: 104858 elements, more than the
        // object limit, which they do not count against.
        let n = 1024;
        let mut xml = String::from(
            "<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\">\
             <object type=\"PU\" os_index=\"0\"/></object>",
        );
        xml.push_str(&format!(
            "<distances2 type=\"NUMANode\" nbobjs=\"{n}\" kind=\"5\" indexing=\"os\">"
        ));
        for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
            let line: Vec<String> = chunk.iter().map(u32::to_string).collect();
            xml.push_str(&format!("<indexes>{}</indexes>", line.join(" ")));
        }
        for i in 0..n * n {
            if i % 10 == 0 {
                xml.push_str("<u64values>");
            }
            xml.push_str(if i % (n + 1) == 0 { "10 " } else { "20 " });
            if i % 10 == 9 || i + 1 == n * n {
                xml.push_str("</u64values>");
            }
        }
        xml.push_str("</distances2></topology>");
        let d = read_extras(&xml).numa_distances.expect("a matrix");
        assert_eq!(d.nodes.len(), 1024);
        assert_eq!((d.at(5, 5), d.at(5, 6)), (Some(10), Some(20)));
        assert!(sanitize(&xml).is_ok());
    }

    #[test]
    fn versions_past_2_are_refused_in_words() {
        assert_eq!(check_version(None), Ok(()));
        assert_eq!(check_version(Some("2.0")), Ok(()));
        assert_eq!(check_version(Some("1.0")), Ok(()));
        let e = check_version(Some("3.0")).unwrap_err();
        assert!(
            e.contains("hwloc 3.0 XML") && e.contains("versions 1 and 2"),
            "{e}"
        );
        assert!(check_version(Some("x")).is_err());
        let e = sanitize(&EXTRAS.replace("version=\"2.0\"", "version=\"3.0\"")).unwrap_err();
        assert!(e.contains("3.0"), "{e}");
    }

    #[test]
    fn memory_side_caches_keep_their_subtype() {
        let xml = r#"<topology version="2.0"><object type="Machine" os_index="0">
            <object type="L3Cache" cache_size="17179869184" depth="3" subtype="MemorySideCache">
              <object type="NUMANode" os_index="0"/>
              <object type="L2Cache" cache_size="1048576" depth="2">
                <object type="Core" os_index="0"><object type="PU" os_index="0"/></object>
              </object>
            </object></object></topology>"#;
        let (clean, _) = sanitize(xml).expect("valid");
        assert_eq!(
            clean.matches("subtype=\"MemorySideCache\"").count(),
            1,
            "{clean}"
        );
    }

    #[test]
    fn entities_are_decoded() {
        assert_eq!(unescape("a&lt;b&#65;&#x42;").as_deref(), Some("a<bAB"));
        assert_eq!(unescape("&bogus;"), None);
        assert_eq!(unescape("&#0;"), None);
    }

    /// One machine of two cores under `outer`, each core under `inner`
    /// (`None`: no such object).
    fn nested(outer: &str, inner: Option<&str>, innermost: Option<&str>) -> String {
        let core = |i: u32| {
            let pu = format!(
                "<object type=\"Core\" os_index=\"{i}\"><object type=\"PU\" os_index=\"{i}\"/></object>"
            );
            let pu = match innermost {
                Some(t) => format!(
                    "<object type=\"{t}\" cache_size=\"1024\" cache_type=\"1\">{pu}</object>"
                ),
                None => pu,
            };
            match inner {
                Some(t) => format!(
                    "<object type=\"{t}\" cache_size=\"1024\" cache_type=\"1\">{pu}</object>"
                ),
                None => pu,
            }
        };
        format!(
            "<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\">\
             <object type=\"{outer}\" cache_size=\"65536\" cache_type=\"2\">{}{}</object>\
             </object></topology>",
            core(0),
            core(1)
        )
    }

    #[test]
    fn caches_of_one_level_nest_either_way_once() {
        // AMD Bulldozer: the module's shared L1i above each core's L1d.
        assert!(sanitize(&nested("L1iCache", Some("L1Cache"), None)).is_ok());
        // And the other way round.
        assert!(sanitize(&nested("L1Cache", Some("L1iCache"), None)).is_ok());
        // But not a third L1 below the pair, and never a level inside a
        // smaller one.
        for (outer, inner, innermost) in [
            ("L1iCache", "L1Cache", "L1iCache"),
            ("L1Cache", "L1iCache", "L1Cache"),
        ] {
            let err = sanitize(&nested(outer, Some(inner), Some(innermost))).unwrap_err();
            assert!(err.contains("not hwloc's order"), "{err}");
        }
        let err = sanitize(&nested("L1iCache", Some("L2Cache"), None)).unwrap_err();
        assert!(
            err.contains("a L2Cache object is inside a L1iCache"),
            "{err}"
        );
    }
}
