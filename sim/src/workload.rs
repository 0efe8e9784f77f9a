//! Workloads: what the simulated tasks do.
//!
//! A workload is a state machine over task ids. The simulator asks it what
//! a task does each time the task runs ([`Workload::run`]: how long it
//! computes, whom it wakes, what it spawns, whether it is done) and lets it
//! act from outside the runtime at times it chooses ([`Workload::timer`]).
//! Wakes and spawns made in `run` come from the worker running the task;
//! those made in `start` and `timer` come from outside (a foreign thread).

use std::collections::VecDeque;

use crate::rng::Rng;

/// A simulated task.
pub type TaskId = usize;

/// Something a task or the outside world does, applied by the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Wake a task (a message arrived, a join completed, a yield).
    Wake(TaskId),
    /// Spawn a new task.
    Spawn(TaskId),
    /// A task that serves one socket (a connection): it exists blocked,
    /// never queued, until its socket becomes readable; its socket is
    /// registered with the I/O driver's poller of the domain that accepted
    /// it (the simulator chooses that CPU; SIMULATION.md, "I/O").
    Socket(TaskId),
    /// A readiness event on the task's socket (a request arrived, from
    /// outside): it goes through the socket's poller, not a wake.
    Ready(TaskId),
    /// Call [`Workload::timer`] with this tag at this time (from outside).
    Timer {
        /// When, in virtual nanoseconds.
        at_ns: u64,
        /// Passed back to the workload.
        tag: u64,
    },
}

/// What a workload callback may do.
pub struct Ctx<'a> {
    /// Virtual time now.
    pub now_ns: u64,
    /// The run's random generator (deterministic per seed).
    pub rng: &'a mut Rng,
    next_task: &'a mut usize,
    actions: &'a mut Vec<Action>,
}

impl<'a> Ctx<'a> {
    /// A context (used by the simulator).
    pub fn new(
        now_ns: u64,
        rng: &'a mut Rng,
        next_task: &'a mut usize,
        actions: &'a mut Vec<Action>,
    ) -> Self {
        Ctx {
            now_ns,
            rng,
            next_task,
            actions,
        }
    }

    /// Spawns a new task and returns its id (ids are given out in order
    /// from 0).
    pub fn spawn(&mut self) -> TaskId {
        let t = *self.next_task;
        *self.next_task += 1;
        self.actions.push(Action::Spawn(t));
        t
    }

    /// Creates a connection's task, blocked on its socket, and returns its
    /// id (from the same sequence as [`spawn`](Self::spawn)).
    pub fn socket(&mut self) -> TaskId {
        let t = *self.next_task;
        *self.next_task += 1;
        self.actions.push(Action::Socket(t));
        t
    }

    /// Makes the socket of `task` (made with [`socket`](Self::socket))
    /// readable: a readiness event for its poller.
    pub fn ready(&mut self, task: TaskId) {
        self.actions.push(Action::Ready(task));
    }

    /// Wakes `task`.
    pub fn wake(&mut self, task: TaskId) {
        self.actions.push(Action::Wake(task));
    }

    /// Asks for [`Workload::timer`] at `at_ns` with `tag`.
    pub fn timer(&mut self, at_ns: u64, tag: u64) {
        self.actions.push(Action::Timer { at_ns, tag });
    }
}

/// One run of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Nanoseconds of the task's own work in this run.
    pub work_ns: u64,
    /// The task is finished (it will not be woken again).
    pub done: bool,
}

/// A simulated program.
pub trait Workload {
    /// A one-line description with its parameters.
    fn describe(&self) -> String;
    /// What one operation is (`message`, `task`), for the throughput line.
    fn op_name(&self) -> &'static str;
    /// Called once at time 0, from outside the runtime.
    fn start(&mut self, ctx: &mut Ctx<'_>);
    /// `task` runs: its work and what it does (from its worker).
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run;
    /// A timer asked for with [`Ctx::timer`] fires (outside the runtime).
    fn timer(&mut self, _tag: u64, _ctx: &mut Ctx<'_>) {}
    /// Operations completed so far.
    fn ops(&self) -> u64;
    /// Per operation, the time from its arrival to the start of the run
    /// that handled it (ns), for workloads whose operations arrive from
    /// outside ([`Io`]); `None` for the others.
    fn op_latencies(&self) -> Option<&[u64]> {
        None
    }
    /// Where `task`'s memory lives ([`Home`]); `None` (the default): the
    /// task has no home and runs at the same cost on every worker.
    fn home(&self, _task: TaskId) -> Option<Home> {
        None
    }
}

/// Where a task's memory lives: its home NUMA node, and what a run of it
/// costs more on a worker of another node (its memory then read across the
/// interconnect). The simulator charges it, counts such runs, and, with
/// `Config::places`, keeps the task on its node's workers as
/// `Place::Numa(node)` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Home {
    /// The node, as `Place::Numa` numbers them: the index of its span among
    /// the topology's NUMA domains in worker order (`Topology::domains`).
    pub node: usize,
    /// The extra time of a run on a worker of another node, in percent of
    /// the run's work.
    pub remote_pct: u64,
}

/// hackbench in pipe mode, scaled down: `groups` groups of `fds` senders
/// and `fds` receivers; each sender writes one message to every receiver of
/// its group per run and yields, `loops` times; a receiver reads every
/// message waiting for it per run, then waits. Operation: a message read.
#[derive(Debug, Clone)]
pub struct Hackbench {
    /// Groups.
    pub groups: usize,
    /// Senders (and receivers) per group.
    pub fds: usize,
    /// Messages each sender writes to each receiver.
    pub loops: usize,
    /// Work to write one message (ns).
    pub send_ns: u64,
    /// Work to read one message (ns).
    pub recv_ns: u64,
    role: Vec<Role>,
    pending: Vec<u64>,
    count: Vec<u64>,
    receivers: Vec<Vec<TaskId>>,
    ops: u64,
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Sender(usize),
    Receiver,
}

impl Hackbench {
    /// A hackbench of these dimensions.
    pub fn new(groups: usize, fds: usize, loops: usize, send_ns: u64, recv_ns: u64) -> Self {
        Hackbench {
            groups,
            fds,
            loops,
            send_ns,
            recv_ns,
            role: Vec::new(),
            pending: Vec::new(),
            count: Vec::new(),
            receivers: Vec::new(),
            ops: 0,
        }
    }

    fn grow(&mut self, t: TaskId, r: Role) {
        debug_assert_eq!(t, self.role.len(), "task ids are handed out in order");
        self.role.push(r);
        self.pending.push(0);
        self.count.push(0);
    }
}

impl Workload for Hackbench {
    fn describe(&self) -> String {
        format!(
            "hackbench pipes: {} groups x {} senders x {} receivers, {} loops, send {} ns, recv {} ns",
            self.groups, self.fds, self.fds, self.loops, self.send_ns, self.recv_ns
        )
    }
    fn op_name(&self) -> &'static str {
        "message"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        for g in 0..self.groups {
            let rs: Vec<TaskId> = (0..self.fds).map(|_| ctx.spawn()).collect();
            for &r in &rs {
                self.grow(r, Role::Receiver);
            }
            self.receivers.push(rs);
            for _ in 0..self.fds {
                let s = ctx.spawn();
                self.grow(s, Role::Sender(g));
            }
        }
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        match self.role[task] {
            Role::Sender(g) => {
                for i in 0..self.fds {
                    let r = self.receivers[g][i];
                    self.pending[r] += 1;
                    ctx.wake(r);
                }
                self.count[task] += 1;
                let done = self.count[task] >= self.loops as u64;
                if !done {
                    ctx.wake(task); // yield
                }
                Run {
                    work_ns: self.fds as u64 * self.send_ns,
                    done,
                }
            }
            Role::Receiver => {
                let n = std::mem::take(&mut self.pending[task]);
                self.count[task] += n;
                self.ops += n;
                Run {
                    // An empty read (the first run) still costs a little.
                    work_ns: n.max(1) * self.recv_ns,
                    done: self.count[task] >= (self.fds * self.loops) as u64,
                }
            }
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// Bursts of independent tasks spawned from outside: `bursts` bursts of
/// `tasks` tasks, one every `period_ns`, each task computing `work_ns`
/// (+-`jitter_pct`%) and finishing. With one burst this is the
/// no-communication workload. Operation: a task finished.
#[derive(Debug, Clone)]
pub struct Burst {
    /// Number of bursts.
    pub bursts: u64,
    /// Tasks per burst.
    pub tasks: u64,
    /// Work per task (ns).
    pub work_ns: u64,
    /// Jitter of the work, in percent.
    pub jitter_pct: u64,
    /// Time between bursts (ns).
    pub period_ns: u64,
    ops: u64,
}

impl Burst {
    /// A burst workload.
    pub fn new(bursts: u64, tasks: u64, work_ns: u64, jitter_pct: u64, period_ns: u64) -> Self {
        Burst {
            bursts,
            tasks,
            work_ns,
            jitter_pct,
            period_ns,
            ops: 0,
        }
    }
}

impl Workload for Burst {
    fn describe(&self) -> String {
        format!(
            "spawn bursts from outside: {} bursts x {} tasks of {} ns (+-{}%), every {} ns",
            self.bursts, self.tasks, self.work_ns, self.jitter_pct, self.period_ns
        )
    }
    fn op_name(&self) -> &'static str {
        "task"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.bursts > 0 {
            ctx.timer(0, 0);
        }
    }
    fn timer(&mut self, tag: u64, ctx: &mut Ctx<'_>) {
        for _ in 0..self.tasks {
            ctx.spawn();
        }
        if tag + 1 < self.bursts {
            ctx.timer(ctx.now_ns + self.period_ns, tag + 1);
        }
    }
    fn run(&mut self, _task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        self.ops += 1;
        Run {
            work_ns: ctx.rng.jitter(self.work_ns, self.jitter_pct),
            done: true,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// Ping-pong pairs: `pairs` pairs of tasks sending one message back and
/// forth `round_trips` times, `work_ns` per message received. Operation: a
/// message received.
#[derive(Debug, Clone)]
pub struct PingPong {
    /// Pairs of tasks.
    pub pairs: usize,
    /// Round trips per pair.
    pub round_trips: u64,
    /// Work per message received (ns).
    pub work_ns: u64,
    started: Vec<bool>,
    msgs: Vec<u64>,
    count: Vec<u64>,
    ops: u64,
}

impl PingPong {
    /// A ping-pong workload.
    pub fn new(pairs: usize, round_trips: u64, work_ns: u64) -> Self {
        PingPong {
            pairs,
            round_trips,
            work_ns,
            started: Vec::new(),
            msgs: Vec::new(),
            count: Vec::new(),
            ops: 0,
        }
    }
}

impl Workload for PingPong {
    fn describe(&self) -> String {
        format!(
            "ping-pong: {} pairs x {} round trips, {} ns per message",
            self.pairs, self.round_trips, self.work_ns
        )
    }
    fn op_name(&self) -> &'static str {
        "message"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        // Task 2p pings, task 2p + 1 answers.
        for _ in 0..2 * self.pairs {
            ctx.spawn();
            self.started.push(false);
            self.msgs.push(0);
            self.count.push(0);
        }
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        let peer = task ^ 1;
        let pinger = task % 2 == 0;
        if pinger && !self.started[task] {
            self.started[task] = true;
            self.msgs[peer] += 1;
            ctx.wake(peer);
            return Run {
                work_ns: self.work_ns,
                done: false,
            };
        }
        if self.msgs[task] == 0 {
            // The answerer's first run: nothing yet.
            return Run {
                work_ns: 0,
                done: false,
            };
        }
        self.msgs[task] -= 1;
        self.count[task] += 1;
        self.ops += 1;
        let done = self.count[task] >= self.round_trips;
        if !(pinger && done) {
            self.msgs[peer] += 1;
            ctx.wake(peer);
        }
        Run {
            work_ns: self.work_ns,
            done,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// Light load, as `benches/light_load.rs`: one message from outside the
/// runtime every `period_ns` to a random one of `receivers` tasks, which
/// computes `work_ns` for it and waits again; `messages` messages, then
/// every receiver is told to finish. The load is `work_ns / period_ns`
/// workers. Operation: a message handled.
#[derive(Debug, Clone)]
pub struct Light {
    /// Receiving tasks.
    pub receivers: usize,
    /// Time between messages (ns).
    pub period_ns: u64,
    /// Work per message (ns).
    pub work_ns: u64,
    /// Messages in all.
    pub messages: u64,
    pending: Vec<u64>,
    closing: bool,
    ops: u64,
}

impl Light {
    /// A light-load workload.
    pub fn new(receivers: usize, period_ns: u64, work_ns: u64, messages: u64) -> Self {
        Light {
            receivers,
            period_ns,
            work_ns,
            messages,
            pending: Vec::new(),
            closing: false,
            ops: 0,
        }
    }

    /// The period that gives `load` (busy fraction) on `workers` workers.
    pub fn period_for(work_ns: u64, workers: usize, load: f64) -> u64 {
        (work_ns as f64 / (load * workers as f64)).max(1.0) as u64
    }
}

impl Workload for Light {
    fn describe(&self) -> String {
        format!(
            "light load: a message every {} ns to a random one of {} receivers, {} ns of work each, {} messages",
            self.period_ns, self.receivers, self.work_ns, self.messages
        )
    }
    fn op_name(&self) -> &'static str {
        "message"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        for _ in 0..self.receivers {
            ctx.spawn();
            self.pending.push(0);
        }
        ctx.timer(self.period_ns, 0);
    }
    fn timer(&mut self, tag: u64, ctx: &mut Ctx<'_>) {
        if tag >= self.messages {
            self.closing = true;
            for r in 0..self.receivers {
                ctx.wake(r);
            }
            return;
        }
        let r = ctx.rng.below(self.receivers as u64) as usize;
        self.pending[r] += 1;
        ctx.wake(r);
        ctx.timer(ctx.now_ns + self.period_ns, tag + 1);
    }
    fn run(&mut self, task: TaskId, _ctx: &mut Ctx<'_>) -> Run {
        let n = std::mem::take(&mut self.pending[task]);
        self.ops += n;
        Run {
            work_ns: n * self.work_ns,
            done: self.closing,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// A fork-join tree: the root (spawned from outside) and every inner node
/// spawn two children from their worker and wait for both; a leaf computes
/// `leaf_ns`; an inner node computes `node_ns` when its children are done.
/// Operation: a node finished.
#[derive(Debug, Clone)]
pub struct ForkJoin {
    /// Depth of the tree (the root alone is depth 0).
    pub depth: u32,
    /// Work of a leaf (ns).
    pub leaf_ns: u64,
    /// Work of an inner node, before forking and after joining (ns).
    pub node_ns: u64,
    level: Vec<u32>,
    parent: Vec<Option<TaskId>>,
    waiting: Vec<u8>,
    forked: Vec<bool>,
    ops: u64,
}

impl ForkJoin {
    /// A fork-join tree.
    pub fn new(depth: u32, leaf_ns: u64, node_ns: u64) -> Self {
        ForkJoin {
            depth,
            leaf_ns,
            node_ns,
            level: Vec::new(),
            parent: Vec::new(),
            waiting: Vec::new(),
            forked: Vec::new(),
            ops: 0,
        }
    }

    fn node(&mut self, ctx: &mut Ctx<'_>, level: u32, parent: Option<TaskId>) -> TaskId {
        let t = ctx.spawn();
        debug_assert_eq!(t, self.level.len(), "task ids are handed out in order");
        self.level.push(level);
        self.parent.push(parent);
        self.waiting.push(0);
        self.forked.push(false);
        t
    }

    fn finish(&mut self, task: TaskId, ctx: &mut Ctx<'_>) {
        self.ops += 1;
        if let Some(p) = self.parent[task] {
            self.waiting[p] -= 1;
            if self.waiting[p] == 0 {
                ctx.wake(p);
            }
        }
    }
}

impl Workload for ForkJoin {
    fn describe(&self) -> String {
        format!(
            "fork-join tree: depth {}, leaf {} ns, inner node {} ns",
            self.depth, self.leaf_ns, self.node_ns
        )
    }
    fn op_name(&self) -> &'static str {
        "node"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.node(ctx, 0, None);
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        let level = self.level[task];
        if level >= self.depth {
            self.finish(task, ctx);
            return Run {
                work_ns: self.leaf_ns,
                done: true,
            };
        }
        if !self.forked[task] {
            self.forked[task] = true;
            self.waiting[task] = 2;
            self.node(ctx, level + 1, Some(task));
            self.node(ctx, level + 1, Some(task));
            return Run {
                work_ns: self.node_ns,
                done: false,
            };
        }
        self.finish(task, ctx);
        Run {
            work_ns: self.node_ns,
            done: true,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// A replayed trace: task arrivals, run lengths and wake edges, so a user
/// can simulate their own program. The format is text, one item a line,
/// `#` starts a comment:
///
/// ```text
/// tasks 3                       # tasks 0, 1, 2 exist (not yet spawned)
/// spawn 0 at 0                  # spawned from outside at t = 0 ns
/// wake 2 at 5000                # woken from outside at t = 5000 ns
/// run 0 2000 spawn 1 wake 2     # task 0's 1st run: 2 us, then spawns 1, wakes 2
/// run 0 500 done                # task 0's 2nd run: 0.5 us, finishes
/// run 1 1000 yield done         # (yield: woken by itself; `done` wins)
/// run 2 300 done
/// ```
///
/// A task's k-th run does what its k-th `run` line says; a task that runs
/// more often than it has lines finishes with zero work. A task spawned by
/// another (`spawn` inside a `run` line) must not also be spawned from
/// outside. Operation: a run replayed.
#[derive(Debug, Clone)]
pub struct Trace {
    runs: Vec<VecDeque<TraceRun>>,
    spawns: Vec<(u64, TaskId)>,
    wakes: Vec<(u64, TaskId)>,
    ids: Vec<TaskId>,
    rev: Vec<usize>,
    total_runs: usize,
    ops: u64,
}

#[derive(Debug, Clone, Default)]
struct TraceRun {
    work_ns: u64,
    wakes: Vec<usize>,
    spawns: Vec<usize>,
    yields: bool,
    done: bool,
}

impl Trace {
    fn rev_grow(&mut self, t: usize) {
        let id = self.ids[t];
        if self.rev.len() <= id {
            self.rev.resize(id + 1, usize::MAX);
        }
        self.rev[id] = t;
    }

    /// Parses a trace; the error names the line.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut n: Option<usize> = None;
        let mut runs: Vec<VecDeque<TraceRun>> = Vec::new();
        let mut spawns = Vec::new();
        let mut wakes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: &str| format!("trace line {}: {m}: {line:?}", i + 1);
            let words: Vec<&str> = line.split_whitespace().collect();
            let num = |s: &str| s.parse::<u64>().map_err(|_| err("not a number"));
            let task = |s: &str, n: Option<usize>| -> Result<usize, String> {
                let t = num(s)? as usize;
                match n {
                    Some(n) if t < n => Ok(t),
                    Some(_) => Err(err("no such task")),
                    None => Err(err("`tasks N` must come first")),
                }
            };
            match words[0] {
                "tasks" if words.len() == 2 && n.is_none() => {
                    let k = num(words[1])? as usize;
                    if k > 10_000_000 {
                        return Err(err("too many tasks"));
                    }
                    n = Some(k);
                    runs = vec![VecDeque::new(); k];
                }
                "spawn" | "wake" if words.len() == 4 && words[2] == "at" => {
                    let t = task(words[1], n)?;
                    let at = num(words[3])?;
                    if words[0] == "spawn" {
                        spawns.push((at, t));
                    } else {
                        wakes.push((at, t));
                    }
                }
                "run" if words.len() >= 3 => {
                    let t = task(words[1], n)?;
                    let mut r = TraceRun {
                        work_ns: num(words[2])?,
                        ..TraceRun::default()
                    };
                    let mut it = words[3..].iter();
                    while let Some(w) = it.next() {
                        match *w {
                            "done" => r.done = true,
                            "yield" => r.yields = true,
                            "wake" | "spawn" => {
                                let x = it.next().ok_or_else(|| err("wake/spawn needs a task"))?;
                                let x = task(x, n)?;
                                if *w == "wake" {
                                    r.wakes.push(x);
                                } else {
                                    r.spawns.push(x);
                                }
                            }
                            _ => return Err(err("unknown word in run")),
                        }
                    }
                    runs[t].push_back(r);
                }
                _ => return Err(err("expected tasks, spawn, wake or run")),
            }
        }
        if n.is_none() {
            return Err("trace: no `tasks N` line".into());
        }
        spawns.sort();
        wakes.sort();
        let total_runs = runs.iter().map(VecDeque::len).sum();
        Ok(Trace {
            total_runs,
            runs,
            spawns,
            wakes,
            ids: Vec::new(),
            rev: Vec::new(),
            ops: 0,
        })
    }
}

impl Workload for Trace {
    fn describe(&self) -> String {
        format!(
            "trace: {} tasks, {} runs, {} external spawns, {} external wakes",
            self.runs.len(),
            self.total_runs,
            self.spawns.len(),
            self.wakes.len()
        )
    }
    fn op_name(&self) -> &'static str {
        "run"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        // The simulator hands out ids in spawn order: map the trace's task
        // numbers to them as they are spawned.
        self.ids = vec![usize::MAX; self.runs.len()];
        for (i, &(at, _)) in self.spawns.iter().enumerate() {
            ctx.timer(at, i as u64);
        }
        for (i, &(at, _)) in self.wakes.iter().enumerate() {
            ctx.timer(at, (1 << 40) + i as u64);
        }
    }
    fn timer(&mut self, tag: u64, ctx: &mut Ctx<'_>) {
        if tag >= 1 << 40 {
            let t = self.wakes[(tag - (1 << 40)) as usize].1;
            if self.ids[t] != usize::MAX {
                ctx.wake(self.ids[t]);
            }
        } else {
            let t = self.spawns[tag as usize].1;
            self.ids[t] = ctx.spawn();
            self.rev_grow(t);
        }
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        let t = self.rev[task];
        let Some(r) = self.runs[t].pop_front() else {
            return Run {
                work_ns: 0,
                done: true,
            };
        };
        self.ops += 1;
        for &s in &r.spawns {
            self.ids[s] = ctx.spawn();
            self.rev_grow(s);
        }
        for &w in &r.wakes {
            if self.ids[w] != usize::MAX {
                ctx.wake(self.ids[w]);
            }
        }
        if r.yields && !r.done {
            ctx.wake(task);
        }
        Run {
            work_ns: r.work_ns,
            done: r.done,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
}

/// A server on sockets: `conns` connections, each a task blocked on its
/// socket (registered with a poller of the I/O driver); requests arrive as
/// one Poisson process of `rate_per_s` requests per second, each to a
/// connection drawn uniformly, as a readiness event on its socket; a run of
/// a connection's task handles every request that arrived before it, at
/// `work_ns` each; `requests` requests in all. Operation: a request
/// handled; its latency is from its arrival to the start of that run.
#[derive(Debug, Clone)]
pub struct Io {
    /// Connections (sockets, one task each).
    pub conns: usize,
    /// Requests per second, all connections together.
    pub rate_per_s: f64,
    /// Work per request (ns).
    pub work_ns: u64,
    /// Requests in all.
    pub requests: u64,
    pending: Vec<VecDeque<u64>>,
    sent: u64,
    lat: Vec<u64>,
    ops: u64,
}

impl Io {
    /// An I/O workload.
    pub fn new(conns: usize, rate_per_s: f64, work_ns: u64, requests: u64) -> Self {
        Io {
            conns: conns.max(1),
            rate_per_s,
            work_ns,
            requests,
            pending: Vec::new(),
            sent: 0,
            lat: Vec::new(),
            ops: 0,
        }
    }

    /// The rate that keeps `load` of `workers` workers busy with the
    /// requests' own work.
    pub fn rate_for(work_ns: u64, workers: usize, load: f64) -> f64 {
        load * workers as f64 * 1e9 / work_ns.max(1) as f64
    }

    /// The next inter-arrival time: exponential with mean 1/rate.
    fn gap(&self, ctx: &mut Ctx<'_>) -> u64 {
        // A uniform in (0, 1]: 53 random bits, never 0.
        let u = ((ctx.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let mean = 1e9 / self.rate_per_s.max(1e-9);
        (-u.ln() * mean).round() as u64
    }
}

impl Workload for Io {
    fn describe(&self) -> String {
        format!(
            "I/O: {} connections, Poisson arrivals at {:.0} requests/s, {} ns of work each, {} requests",
            self.conns, self.rate_per_s, self.work_ns, self.requests
        )
    }
    fn op_name(&self) -> &'static str {
        "request"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        for c in 0..self.conns {
            let t = ctx.socket();
            debug_assert_eq!(t, c, "sockets are the first tasks");
            self.pending.push(VecDeque::new());
        }
        if self.requests > 0 {
            let g = self.gap(ctx);
            ctx.timer(ctx.now_ns + g, 0);
        }
    }
    fn timer(&mut self, _tag: u64, ctx: &mut Ctx<'_>) {
        let c = ctx.rng.below(self.conns as u64) as usize;
        self.pending[c].push_back(ctx.now_ns);
        ctx.ready(c);
        self.sent += 1;
        if self.sent < self.requests {
            let g = self.gap(ctx);
            ctx.timer(ctx.now_ns + g, 0);
        }
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        let q = std::mem::take(&mut self.pending[task]);
        let n = q.len() as u64;
        self.lat
            .extend(q.into_iter().map(|a| ctx.now_ns.saturating_sub(a)));
        self.ops += n;
        Run {
            work_ns: n * self.work_ns,
            done: false,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
    fn op_latencies(&self) -> Option<&[u64]> {
        Some(&self.lat)
    }
}

/// A service sharded by NUMA node: each shard's data lives on its node, and
/// every task of a shard reads it, so a run on another node's worker costs
/// `remote_pct` percent more ([`Home`]). Requests arrive from outside in
/// `bursts` bursts of `requests` every `period_ns`; request `k` of a burst
/// belongs to shard `k mod nodes`, or, with `hot_pct`, the first `hot_pct`
/// percent of each burst to shard 0 and the rest round robin over the
/// others (imbalanced shards). A request spawns `fanout` subtasks of its
/// shard from its worker (`work_ns` each, +-20%) and waits for them, then
/// finishes (`work_ns` before the fork and after the join). Operation: a
/// task finished.
#[derive(Debug, Clone)]
pub struct Shards {
    /// Shards: one per NUMA node of the machine.
    pub nodes: usize,
    /// Bursts of requests.
    pub bursts: u64,
    /// Requests per burst.
    pub requests: u64,
    /// Subtasks per request.
    pub fanout: usize,
    /// Work of each run (ns).
    pub work_ns: u64,
    /// Time between bursts (ns).
    pub period_ns: u64,
    /// Extra cost of a run off its home node, in percent of its work.
    pub remote_pct: u64,
    /// Share of each burst's requests on shard 0, in percent; `None`: every
    /// shard the same share.
    pub hot_pct: Option<u64>,
    home: Vec<usize>,
    parent: Vec<Option<TaskId>>,
    waiting: Vec<usize>,
    forked: Vec<bool>,
    ops: u64,
}

impl Shards {
    /// A sharded service over `nodes` nodes (at least one), with the
    /// defaults of `--workload shards`: 10 bursts of 256 requests every
    /// 200 us, 4 subtasks each, 10 us a run, +50% off the home node, even
    /// shards. The fields say what to change.
    pub fn new(nodes: usize) -> Self {
        Shards {
            nodes: nodes.max(1),
            bursts: 10,
            requests: 256,
            fanout: 4,
            work_ns: 10_000,
            period_ns: 200_000,
            remote_pct: 50,
            hot_pct: None,
            home: Vec::new(),
            parent: Vec::new(),
            waiting: Vec::new(),
            forked: Vec::new(),
            ops: 0,
        }
    }

    /// The shard of request `k` of a burst.
    pub fn shard_of(&self, k: u64) -> usize {
        match self.hot_pct {
            None => (k % self.nodes as u64) as usize,
            Some(_) if self.nodes == 1 => 0,
            Some(p) => {
                let hot = self.requests * p.min(100) / 100;
                if k < hot {
                    0
                } else {
                    1 + ((k - hot) % (self.nodes as u64 - 1)) as usize
                }
            }
        }
    }

    fn task(&mut self, ctx: &mut Ctx<'_>, home: usize, parent: Option<TaskId>) -> TaskId {
        let t = ctx.spawn();
        debug_assert_eq!(t, self.home.len(), "task ids are handed out in order");
        self.home.push(home);
        self.parent.push(parent);
        self.waiting.push(0);
        self.forked.push(false);
        t
    }
}

impl Workload for Shards {
    fn describe(&self) -> String {
        let share = match self.hot_pct {
            None => "even shards".to_string(),
            Some(p) => format!("{p}% of requests on shard 0"),
        };
        format!(
            "NUMA shards: {} nodes, {} bursts x {} requests every {} ns, {} subtasks each, {} ns a run (+-20%), +{}% off the home node, {}",
            self.nodes,
            self.bursts,
            self.requests,
            self.period_ns,
            self.fanout,
            self.work_ns,
            self.remote_pct,
            share
        )
    }
    fn op_name(&self) -> &'static str {
        "task"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.bursts > 0 {
            ctx.timer(0, 0);
        }
    }
    fn timer(&mut self, tag: u64, ctx: &mut Ctx<'_>) {
        for k in 0..self.requests {
            let s = self.shard_of(k);
            self.task(ctx, s, None);
        }
        if tag + 1 < self.bursts {
            ctx.timer(ctx.now_ns + self.period_ns, tag + 1);
        }
    }
    fn run(&mut self, task: TaskId, ctx: &mut Ctx<'_>) -> Run {
        let work_ns = ctx.rng.jitter(self.work_ns, 20);
        if self.parent[task].is_none() && !self.forked[task] && self.fanout > 0 {
            self.forked[task] = true;
            self.waiting[task] = self.fanout;
            let home = self.home[task];
            for _ in 0..self.fanout {
                self.task(ctx, home, Some(task));
            }
            return Run {
                work_ns,
                done: false,
            };
        }
        self.ops += 1;
        if let Some(p) = self.parent[task] {
            self.waiting[p] -= 1;
            if self.waiting[p] == 0 {
                ctx.wake(p);
            }
        }
        Run {
            work_ns,
            done: true,
        }
    }
    fn ops(&self) -> u64 {
        self.ops
    }
    fn home(&self, task: TaskId) -> Option<Home> {
        self.home.get(task).map(|&node| Home {
            node,
            remote_pct: self.remote_pct,
        })
    }
}
