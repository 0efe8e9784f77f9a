//! A [`Trace`] as Chrome Trace Event JSON ([`Trace::write_chrome_json`]
//! says what goes where).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::panic::Location;

use super::record::{EventKind, Thread, Trace};

/// The process of the outside threads (after every LLC's).
const OUTSIDE_PID: u64 = 1_000_000;

fn pid_tid(t: &Trace, th: Thread) -> (u64, u64) {
    match th {
        Thread::Worker(w) => (t.workers()[w].llc as u64 + 1, w as u64 + 1),
        Thread::Outside(id) => (OUTSIDE_PID, OUTSIDE_PID + u64::from(id)),
    }
}

/// Microseconds, from nanoseconds, as Chrome's `ts` wants them.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// `s` as a JSON string literal.
fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn loc(at: &Location<'_>) -> String {
    format!("{}:{}", at.file(), at.line())
}

struct Out<W: Write> {
    w: W,
    first: bool,
}

impl<W: Write> Out<W> {
    fn event(&mut self, body: std::fmt::Arguments<'_>) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",\n")?;
        }
        self.first = false;
        self.w.write_fmt(body)
    }
}

pub(super) fn write(t: &Trace, w: impl Write) -> io::Result<()> {
    let mut o = Out {
        w: io::BufWriter::new(w),
        first: true,
    };
    o.w.write_all(b"{\"traceEvents\":[\n")?;
    // The structure: a process per LLC, a thread per worker.
    let mut llcs: Vec<usize> = t.workers().iter().map(|p| p.llc).collect();
    llcs.sort_unstable();
    llcs.dedup();
    for &l in &llcs {
        let p = t
            .workers()
            .iter()
            .find(|p| p.llc == l)
            .expect("an LLC of a worker");
        let name = format!("package {} / NUMA {} / LLC {}", p.package, p.numa, l);
        o.event(format_args!(
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"ts\":0,\"args\":{{\"name\":{},\"package\":{},\"numa\":{},\"llc\":{}}}}}",
            l + 1,
            string(&name),
            p.package,
            p.numa,
            l
        ))?;
        o.event(format_args!(
            "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"ts\":0,\"args\":{{\"sort_index\":{}}}}}",
            l + 1,
            l
        ))?;
    }
    for (w, p) in t.workers().iter().enumerate() {
        let (pid, tid) = pid_tid(t, Thread::Worker(w));
        let name = format!("worker {w} (core {})", p.core);
        o.event(format_args!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"ts\":0,\"args\":{{\"name\":{},\"worker\":{w},\"core\":{},\"llc\":{},\"numa\":{},\"package\":{},\"dropped\":{}}}}}",
            string(&name),
            p.core,
            p.llc,
            p.numa,
            p.package,
            t.dropped(w)
        ))?;
        o.event(format_args!(
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"ts\":0,\"args\":{{\"sort_index\":{w}}}}}"
        ))?;
    }
    let mut outside: Vec<u32> = t
        .events()
        .iter()
        .filter_map(|e| match e.thread {
            Thread::Outside(id) => Some(id),
            Thread::Worker(_) => None,
        })
        .collect();
    outside.sort_unstable();
    outside.dedup();
    if !outside.is_empty() {
        o.event(format_args!(
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{OUTSIDE_PID},\"tid\":0,\"ts\":0,\"args\":{{\"name\":\"outside the workers\"}}}}"
        ))?;
        o.event(format_args!(
            "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{OUTSIDE_PID},\"tid\":0,\"ts\":0,\"args\":{{\"sort_index\":{OUTSIDE_PID}}}}}"
        ))?;
        for &id in &outside {
            let (pid, tid) = pid_tid(t, Thread::Outside(id));
            let name = t.outside_name(id).unwrap_or("outside thread");
            // A `block_on` thread's lane says so, and what its ring lost.
            let lane = if t.block_on_threads().any(|l| l == id) {
                format!(
                    ",\"block_on\":true,\"dropped\":{}",
                    t.dropped_on(Thread::Outside(id))
                )
            } else {
                String::new()
            };
            o.event(format_args!(
                "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"ts\":0,\"args\":{{\"name\":{}{lane}}}}}",
                string(name)
            ))?;
        }
    }

    // Polls (paired), each with its run-queue delay and the flow from the
    // wake that made it runnable.
    let mut runnable: HashMap<u64, (u64, Option<(Thread, u64)>)> = HashMap::new();
    // The end of each poll, found ahead (a poll's end follows its start on
    // one thread).
    let mut open: HashMap<Thread, usize> = HashMap::new();
    let mut end_of: Vec<Option<(u64, bool)>> = vec![None; t.events().len()];
    for (i, e) in t.events().iter().enumerate() {
        match e.kind {
            EventKind::PollStart { .. } => {
                open.insert(e.thread, i);
            }
            EventKind::PollEnd { ready, .. } => {
                if let Some(s) = open.remove(&e.thread) {
                    end_of[s] = Some((e.ts_ns, ready));
                }
            }
            _ => {}
        }
    }
    let mut flow = 0u64;
    for (i, e) in t.events().iter().enumerate() {
        let (pid, tid) = pid_tid(t, e.thread);
        let ts = us(e.ts_ns);
        match e.kind {
            EventKind::PollStart { task, at } => {
                let Some((end, ready)) = end_of[i] else {
                    continue;
                };
                let queued = runnable.remove(&task);
                let delay = queued.map_or(String::from("null"), |(r, _)| {
                    e.ts_ns.saturating_sub(r).to_string()
                });
                o.event(format_args!(
                    "{{\"name\":{},\"cat\":\"poll\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts},\"dur\":{},\"args\":{{\"task\":{task},\"at\":{},\"queued_ns\":{delay},\"ready\":{ready}}}}}",
                    string(&loc(at)),
                    us(end.saturating_sub(e.ts_ns)),
                    string(&loc(at)),
                ))?;
                if let Some((_, Some((from, wts)))) = queued {
                    flow += 1;
                    let (fpid, ftid) = pid_tid(t, from);
                    o.event(format_args!(
                        "{{\"name\":\"wake\",\"cat\":\"wake\",\"ph\":\"s\",\"id\":{flow},\"pid\":{fpid},\"tid\":{ftid},\"ts\":{},\"args\":{{\"task\":{task}}}}}",
                        us(wts)
                    ))?;
                    o.event(format_args!(
                        "{{\"name\":\"wake\",\"cat\":\"wake\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{flow},\"pid\":{pid},\"tid\":{tid},\"ts\":{ts},\"args\":{{\"task\":{task}}}}}"
                    ))?;
                }
            }
            EventKind::PollEnd { .. } => {}
            EventKind::Spawn { task, at } => {
                runnable.insert(task, (e.ts_ns, None));
                instant(
                    &mut o,
                    "spawn",
                    pid,
                    tid,
                    &ts,
                    format_args!("\"task\":{task},\"at\":{}", string(&loc(at))),
                )?;
            }
            EventKind::Blocking { task, at } => instant(
                &mut o,
                "blocking hand-off",
                pid,
                tid,
                &ts,
                format_args!("\"task\":{task},\"at\":{}", string(&loc(at))),
            )?,
            EventKind::Wake { task, to, decision } => {
                // The first wake of a runnable task makes it runnable; a
                // second before its poll (a deferred placement, recorded
                // after the first) says where it went: the flow starts
                // there.
                let since = runnable.get(&task).map_or(e.ts_ns, |(t, _)| *t);
                runnable.insert(task, (since, Some((e.thread, e.ts_ns))));
                instant(
                    &mut o,
                    "wake",
                    pid,
                    tid,
                    &ts,
                    format_args!(
                        "\"task\":{task},\"to\":{to},\"decision\":{}",
                        string(decision.name())
                    ),
                )?;
            }
            EventKind::Steal {
                victim,
                moved,
                level,
            } => instant(
                &mut o,
                "steal",
                pid,
                tid,
                &ts,
                format_args!(
                    "\"victim\":{victim},\"moved\":{moved},\"level\":{}",
                    string(level)
                ),
            )?,
            EventKind::Park { why } => instant(
                &mut o,
                "park",
                pid,
                tid,
                &ts,
                format_args!("\"why\":{}", string(why.name())),
            )?,
            EventKind::Unpark => instant(&mut o, "unpark", pid, tid, &ts, format_args!(""))?,
            EventKind::Notify { target } => instant(
                &mut o,
                "notify",
                pid,
                tid,
                &ts,
                format_args!("\"target\":{target}"),
            )?,
            EventKind::PollerTurn { events, batch } => instant(
                &mut o,
                "poller turn",
                pid,
                tid,
                &ts,
                format_args!("\"events\":{events},\"batch\":{batch}"),
            )?,
            EventKind::WatcherTake { tasks, long } => instant(
                &mut o,
                "watcher take",
                pid,
                tid,
                &ts,
                format_args!("\"tasks\":{tasks},\"long\":{long}"),
            )?,
            EventKind::TimersFired { count } => instant(
                &mut o,
                "timers fired",
                pid,
                tid,
                &ts,
                format_args!("\"count\":{count}"),
            )?,
        }
    }
    o.w.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"hwsched\",")?;
    let dropped: Vec<String> = (0..t.workers().len())
        .map(|w| t.dropped(w).to_string())
        .collect();
    writeln!(
        o.w,
        "\"workers\":{},\"dropped\":[{}],\"outside_dropped\":{}}}}}",
        t.workers().len(),
        dropped.join(","),
        t.outside_dropped()
    )?;
    o.w.flush()
}

fn instant<W: Write>(
    o: &mut Out<W>,
    name: &str,
    pid: u64,
    tid: u64,
    ts: &str,
    args: std::fmt::Arguments<'_>,
) -> io::Result<()> {
    o.event(format_args!(
        "{{\"name\":\"{name}\",\"cat\":\"{name}\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts},\"args\":{{{args}}}}}"
    ))
}
