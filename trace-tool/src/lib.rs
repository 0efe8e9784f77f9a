//! Reads a hwsched scheduler trace (the Chrome Trace Event JSON that
//! `hwsched::trace::Trace::write_chrome_json` writes), renders it as an SVG
//! timeline ([`svg`]: one lane per worker in topology order, then one per
//! thread that ran `block_on` with local tasks, polls coloured by their
//! task's spawn location, parks and steals marked) and summarises it
//! ([`summary`]: per-lane busy share, run-queue delay percentiles,
//! the longest polls with their spawn locations, steals per level, wakes
//! by placement decision).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::Value;

/// A worker's lane: where it sits in the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// The worker's index.
    pub index: usize,
    /// Its core, LLC, NUMA node and package.
    pub core: u64,
    /// Its last-level cache.
    pub llc: u64,
    /// Its NUMA node.
    pub numa: u64,
    /// Its package.
    pub package: u64,
    /// Events its ring dropped.
    pub dropped: u64,
}

/// A thread that ran `block_on` while the trace recorded: its own lane,
/// which holds the polls of its local tasks (`spawn_local`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockOn {
    /// Its thread id in the trace (`tid`).
    pub tid: u64,
    /// Its name in the trace.
    pub name: String,
    /// Events its ring dropped.
    pub dropped: u64,
}

/// Where a poll ran or a mark was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// A worker, by its index.
    Worker(usize),
    /// A `block_on` thread, by its `tid` ([`BlockOn::tid`]).
    BlockOn(u64),
}

/// One poll.
#[derive(Debug, Clone, PartialEq)]
pub struct Poll {
    /// The lane of the thread that ran it.
    pub lane: Lane,
    /// The task's trace id.
    pub task: u64,
    /// Its task's spawn location (`file:line`).
    pub at: String,
    /// Start, in microseconds of the trace's clock.
    pub ts_us: f64,
    /// Length, in microseconds.
    pub dur_us: f64,
    /// Run-queue delay before it (from the task's spawn or wake), when the
    /// trace knows it.
    pub queued_ns: Option<u64>,
}

/// An instant event of a worker or a `block_on` thread (a steal, a park,
/// an unpark, a spawn...).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// The lane it was made on.
    pub lane: Lane,
    /// Its name in the trace (`"steal"`, `"park"`, `"unpark"`, ...).
    pub name: String,
    /// When, in microseconds.
    pub ts_us: f64,
    /// Its `args`.
    pub args: Value,
}

/// A trace as this tool sees it.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The workers, in topology order (their index).
    pub workers: Vec<Worker>,
    /// The threads that ran `block_on` with a lane of their own, by `tid`.
    pub block_on: Vec<BlockOn>,
    /// Every poll of a worker or a `block_on` thread, in order of start.
    pub polls: Vec<Poll>,
    /// Every instant event of a worker or a `block_on` thread, in time
    /// order.
    pub marks: Vec<Mark>,
    /// Wakes by placement decision (from every thread, outside ones too).
    pub wakes: BTreeMap<String, u64>,
    /// The first and last moments of the trace, in microseconds.
    pub span_us: (f64, f64),
}

/// What can be wrong with a trace file.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Parses a trace from its JSON (the object form, `{"traceEvents": ...}`,
/// or a bare array of events).
pub fn parse(json: &str) -> Result<Trace, Error> {
    let v: Value = serde_json::from_str(json).map_err(|e| Error(format!("not JSON: {e}")))?;
    let events = match &v {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("traceEvents")
            .and_then(Value::as_array)
            .ok_or_else(|| Error("no traceEvents array".into()))?,
        _ => return Err(Error("neither an object nor an array".into())),
    };
    let mut t = Trace::default();
    // (pid, tid) -> lane, from the thread_name metadata.
    let mut lane: HashMap<(u64, u64), Lane> = HashMap::new();
    for e in events {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            let a = &e["args"];
            let key = (
                e["pid"].as_u64().unwrap_or(0),
                e["tid"].as_u64().unwrap_or(0),
            );
            if a["block_on"] == true {
                lane.insert(key, Lane::BlockOn(key.1));
                t.block_on.push(BlockOn {
                    tid: key.1,
                    name: a["name"].as_str().unwrap_or("block_on").to_owned(),
                    dropped: a["dropped"].as_u64().unwrap_or(0),
                });
            } else if let Some(w) = a["worker"].as_u64() {
                lane.insert(key, Lane::Worker(w as usize));
                t.workers.push(Worker {
                    index: w as usize,
                    core: a["core"].as_u64().unwrap_or(0),
                    llc: a["llc"].as_u64().unwrap_or(0),
                    numa: a["numa"].as_u64().unwrap_or(0),
                    package: a["package"].as_u64().unwrap_or(0),
                    dropped: a["dropped"].as_u64().unwrap_or(0),
                });
            }
        }
    }
    t.workers.sort_by_key(|w| w.index);
    t.block_on.sort_by_key(|b| b.tid);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for e in events {
        let ph = e["ph"].as_str().unwrap_or("");
        if ph == "M" {
            continue;
        }
        let Some(ts) = num(&e["ts"]) else {
            return Err(Error(format!("an event without ts: {e}")));
        };
        let dur = num(&e["dur"]).unwrap_or(0.0);
        lo = lo.min(ts);
        hi = hi.max(ts + dur);
        let key = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        let name = e["name"].as_str().unwrap_or("").to_owned();
        if ph == "i" && name == "wake" {
            let d = e["args"]["decision"].as_str().unwrap_or("?").to_owned();
            *t.wakes.entry(d).or_default() += 1;
        }
        let Some(&lane) = lane.get(&key) else {
            continue;
        };
        match ph {
            "X" => t.polls.push(Poll {
                lane,
                task: e["args"]["task"].as_u64().unwrap_or(0),
                at: e["args"]["at"].as_str().unwrap_or(&name).to_owned(),
                ts_us: ts,
                dur_us: dur,
                queued_ns: e["args"]["queued_ns"].as_u64(),
            }),
            "i" | "I" => t.marks.push(Mark {
                lane,
                name,
                ts_us: ts,
                args: e["args"].clone(),
            }),
            _ => {}
        }
    }
    t.polls.sort_by(|a, b| a.ts_us.total_cmp(&b.ts_us));
    t.marks.sort_by(|a, b| a.ts_us.total_cmp(&b.ts_us));
    t.span_us = if lo <= hi { (lo, hi) } else { (0.0, 0.0) };
    Ok(t)
}

/// A colour for a spawn location: a hue from its hash, so that one
/// location keeps its colour from trace to trace.
pub fn colour(at: &str) -> String {
    // FNV-1a.
    let mut h: u32 = 0x811c_9dc5;
    for b in at.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("hsl({},65%,50%)", h % 360)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Width of the drawing, in pixels.
const WIDTH: f64 = 1200.0;
/// The labels' column.
const LEFT: f64 = 190.0;
/// Height of a lane.
const LANE: f64 = 16.0;
/// Above the first lane: the title and the time axis.
const TOP: f64 = 40.0;

/// Renders the trace as an SVG timeline: a lane (`<g class="lane">`) per
/// worker in topology order, grouped by LLC (a label per group), then a
/// lane (`<g class="block-on-lane">`) per `block_on` thread; each poll
/// a `<rect class="poll">` coloured by its spawn location (with a
/// `<title>`); parks as grey bars (`class="park"`, from a park to the next
/// unpark) and steals as red ticks (`class="steal"`); a legend of the spawn
/// locations below.
pub fn svg(t: &Trace) -> String {
    let (t0, t1) = t.span_us;
    let span = (t1 - t0).max(1e-3);
    let x = |ts: f64| LEFT + (ts - t0) / span * (WIDTH - LEFT - 10.0);
    let mut locs: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &t.polls {
        *locs.entry(p.at.as_str()).or_default() += 1;
    }
    // Each lane's row: the workers in topology order, then the block_on
    // threads.
    let row: HashMap<Lane, usize> = t
        .workers
        .iter()
        .map(|w| Lane::Worker(w.index))
        .chain(t.block_on.iter().map(|b| Lane::BlockOn(b.tid)))
        .enumerate()
        .map(|(i, l)| (l, i))
        .collect();
    let lanes_h = row.len() as f64 * LANE;
    let height = TOP + lanes_h + 30.0 + locs.len() as f64 * 14.0 + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="4" y="14" font-size="12">hwsched trace: {} workers, {} block_on threads, {} polls, {:.3} ms</text>"#,
        t.workers.len(),
        t.block_on.len(),
        t.polls.len(),
        span / 1e3
    );
    // The time axis: five ticks.
    for i in 0..=4 {
        let ts = t0 + span * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="32" text-anchor="middle">{:.3} ms</text>"#,
            x(ts),
            (ts - t0) / 1e3
        );
    }
    let mut last_llc = None;
    for (i, w) in t.workers.iter().enumerate() {
        let y = TOP + i as f64 * LANE;
        let _ = writeln!(s, r#"<g class="lane" data-worker="{}">"#, w.index);
        let fill = if w.llc % 2 == 0 { "#f4f4f4" } else { "#e8eef6" };
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{y}" width="{}" height="{LANE}" fill="{fill}"/>"#,
            WIDTH - LEFT - 10.0
        );
        let group = if last_llc != Some(w.llc) {
            format!("p{} n{} llc{} ", w.package, w.numa, w.llc)
        } else {
            String::new()
        };
        last_llc = Some(w.llc);
        let _ = writeln!(
            s,
            r#"<text x="4" y="{:.1}">{}worker {} (core {})</text>"#,
            y + LANE - 4.0,
            group,
            w.index,
            w.core
        );
        let _ = writeln!(s, "</g>");
    }
    for (i, b) in t.block_on.iter().enumerate() {
        let y = TOP + (t.workers.len() + i) as f64 * LANE;
        let _ = writeln!(s, r#"<g class="block-on-lane" data-tid="{}">"#, b.tid);
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{y}" width="{}" height="{LANE}" fill="#f6f1e6"/>"##,
            WIDTH - LEFT - 10.0
        );
        let _ = writeln!(
            s,
            r#"<text x="4" y="{:.1}">block_on: {}</text>"#,
            y + LANE - 4.0,
            esc(&b.name)
        );
        let _ = writeln!(s, "</g>");
    }
    // Parks: from a park to the worker's next unpark.
    let mut parked: HashMap<Lane, f64> = HashMap::new();
    for m in &t.marks {
        let Some(&r) = row.get(&m.lane) else {
            continue;
        };
        let y = TOP + r as f64 * LANE;
        match m.name.as_str() {
            "park" => {
                parked.insert(m.lane, m.ts_us);
            }
            "unpark" => {
                if let Some(from) = parked.remove(&m.lane) {
                    let _ = writeln!(
                        s,
                        r##"<rect class="park" x="{:.2}" y="{:.1}" width="{:.2}" height="3" fill="#999"/>"##,
                        x(from),
                        y + LANE / 2.0 - 1.5,
                        (x(m.ts_us) - x(from)).max(0.5)
                    );
                }
            }
            _ => {}
        }
    }
    for p in &t.polls {
        let Some(&r) = row.get(&p.lane) else {
            continue;
        };
        let y = TOP + r as f64 * LANE + 2.0;
        let _ = writeln!(
            s,
            r#"<rect class="poll" x="{:.2}" y="{y:.1}" width="{:.2}" height="{}" fill="{}"><title>{} task {} {:.3} us</title></rect>"#,
            x(p.ts_us),
            (x(p.ts_us + p.dur_us) - x(p.ts_us)).max(0.4),
            LANE - 4.0,
            colour(&p.at),
            esc(&p.at),
            p.task,
            p.dur_us
        );
    }
    for m in t.marks.iter().filter(|m| m.name == "steal") {
        let Some(&r) = row.get(&m.lane) else {
            continue;
        };
        let y = TOP + r as f64 * LANE;
        let _ = writeln!(
            s,
            r#"<path class="steal" d="M{:.2} {y:.1} l-3 -4 h6 z" fill="red"><title>steal from worker {} ({})</title></path>"#,
            x(m.ts_us),
            m.args["victim"],
            esc(m.args["level"].as_str().unwrap_or("?"))
        );
    }
    // The legend: each spawn location's colour and its polls.
    let ly = TOP + lanes_h + 20.0;
    let _ = writeln!(
        s,
        r##"<text x="4" y="{ly:.1}">grey bar: parked; red mark: steal; polls coloured by spawn location:</text>"##
    );
    for (i, (at, n)) in locs.iter().enumerate() {
        let y = ly + 14.0 * (i as f64 + 1.0);
        let _ = writeln!(
            s,
            r#"<rect x="4" y="{:.1}" width="10" height="10" fill="{}"/><text x="18" y="{:.1}">{} ({} polls)</text>"#,
            y - 9.0,
            colour(at),
            y,
            esc(at),
            n
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The value at quantile `q` (0..=1) of sorted `v`.
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

/// The number of polls in `lane` and their total length, in microseconds.
fn lane_polls(t: &Trace, lane: Lane) -> (usize, f64) {
    t.polls
        .iter()
        .filter(|p| p.lane == lane)
        // From +0.0: an empty float sum is -0.0.
        .fold((0, 0.0), |(n, busy), p| (n + 1, busy + p.dur_us))
}

/// The trace's summary, as text: per-worker (and per-`block_on`-thread)
/// busy share, run-queue delay
/// percentiles, the longest polls with their spawn locations, steals per
/// level and wakes by placement decision.
pub fn summary(t: &Trace) -> String {
    let (t0, t1) = t.span_us;
    let span = (t1 - t0).max(1e-9);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "trace: {} workers, {} polls, {:.3} ms",
        t.workers.len(),
        t.polls.len(),
        span / 1e3
    );
    let _ = writeln!(
        s,
        "\nworker  llc  numa  pack    polls   busy   parks  steals  dropped"
    );
    for w in &t.workers {
        let lane = Lane::Worker(w.index);
        let (polls, busy) = lane_polls(t, lane);
        let count = |n: &str| {
            t.marks
                .iter()
                .filter(|m| m.lane == lane && m.name == n)
                .count()
        };
        let _ = writeln!(
            s,
            "{:>6} {:>4} {:>5} {:>5} {:>8} {:>5.1}% {:>7} {:>7} {:>8}",
            w.index,
            w.llc,
            w.numa,
            w.package,
            polls,
            100.0 * busy / span,
            count("park"),
            count("steal"),
            w.dropped
        );
    }
    if !t.block_on.is_empty() {
        let _ = writeln!(
            s,
            "\nblock_on thread (local tasks)     polls   busy  dropped"
        );
        for b in &t.block_on {
            let (polls, busy) = lane_polls(t, Lane::BlockOn(b.tid));
            let _ = writeln!(
                s,
                "{:<30} {:>8} {:>5.1}% {:>8}",
                b.name,
                polls,
                100.0 * busy / span,
                b.dropped
            );
        }
    }
    let mut delays: Vec<u64> = t.polls.iter().filter_map(|p| p.queued_ns).collect();
    delays.sort_unstable();
    let _ = writeln!(
        s,
        "\nrun-queue delay ({} polls): p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us",
        delays.len(),
        quantile(&delays, 0.5) as f64 / 1e3,
        quantile(&delays, 0.9) as f64 / 1e3,
        quantile(&delays, 0.99) as f64 / 1e3,
        delays.last().copied().unwrap_or(0) as f64 / 1e3
    );
    let mut longest: Vec<&Poll> = t.polls.iter().collect();
    longest.sort_by(|a, b| b.dur_us.total_cmp(&a.dur_us));
    let _ = writeln!(s, "\nlongest polls:");
    for p in longest.iter().take(10) {
        let _ = writeln!(
            s,
            "  {:>10.3} us  {:<12}  task {:>8}  {}",
            p.dur_us,
            match p.lane {
                Lane::Worker(w) => format!("worker {w}"),
                Lane::BlockOn(tid) => format!("block_on {tid}"),
            },
            p.task,
            p.at
        );
    }
    let mut levels: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for m in t.marks.iter().filter(|m| m.name == "steal") {
        let l = levels
            .entry(m.args["level"].as_str().unwrap_or("?").to_owned())
            .or_default();
        l.0 += 1;
        l.1 += m.args["moved"].as_u64().unwrap_or(0);
    }
    let _ = writeln!(s, "\nsteals per level:");
    if levels.is_empty() {
        let _ = writeln!(s, "  none");
    }
    for (l, (n, moved)) in &levels {
        let _ = writeln!(s, "  {l:<8} {n:>8} steals, {moved:>8} tasks moved");
    }
    let _ = writeln!(s, "\nwakes by placement decision:");
    if t.wakes.is_empty() {
        let _ = writeln!(s, "  none");
    }
    let total: u64 = t.wakes.values().sum();
    for (d, n) in &t.wakes {
        let _ = writeln!(
            s,
            "  {d:<15} {n:>8} ({:.1}%)",
            100.0 * *n as f64 / total.max(1) as f64
        );
    }
    s
}
