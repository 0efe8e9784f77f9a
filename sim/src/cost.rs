//! The cost model: what each mechanism step costs in simulated time.
//!
//! Every parameter is a named field with its source. The defaults are
//! order-of-magnitude figures for current x86 servers from published
//! measurements, not measurements of any one machine; they are meant to
//! be calibrated (SIMULATION.md says what has and has not been).
//!
//! Sources, cited by the fields below:
//! - **[C2C]** Chips and Cheese, "Core to Core Latency Data on Large
//!   Systems" (2023-11-07), and AnandTech's core-to-core latency test in
//!   its Zen 4 review ("AMD Zen 4 Ryzen 9 7950X and Ryzen 5 7600X Review"):
//!   a cache line bounced between cores with compare-and-exchange. Zen 3/4:
//!   15-19 ns inside one CCX (the L3), up to ~80 ns between CCDs of one
//!   package; two sockets: roughly 150-200 ns (order of magnitude from the
//!   large-system data; not re-measured here).
//! - **[MEM]** AnandTech, "AMD Rome Second Generation EPYC Review", memory
//!   subsystem latency table: L2 ~12-14 cycles, L3 ~34-46 cycles
//!   (~10-15 ns), DRAM full random ~113-134 ns.
//! - **[IDLE]** Linux `drivers/idle/intel_idle.c`, `skx_cstates`: C1 exit
//!   latency 2 us, C1E 10 us (C6 133 us); a parked worker's CPU is in a
//!   shallow C-state when the wake comes, plus the scheduler's own wakeup
//!   path (`try_to_wake_up`, a few us).
//! - **[VM]** `policy/governor.rs`: the futex park/unpark round trip measured at
//!   start-up by the runtime: ~26 us of CPU on the benchmarks' 2-core VM,
//!   "a few us on bare metal".
//! - **[EPOLL]** Linux `fs/eventpoll.c`: `ep_poll_callback` runs in the
//!   softirq of the CPU that received the packet and adds the socket to the
//!   instance's ready list (since 5.1 under the read side of `ep->lock`
//!   with a lockless list add, so callbacks share lines rather than wait
//!   for each other); `epoll_wait` (`ep_poll`, `ep_send_events`) takes the
//!   write side to splice the ready list and re-polls and copies each
//!   event under `ep->mtx`; `epoll_ctl` takes `ep->mtx`. Every one of them
//!   writes the instance's lock and list-head lines, which move to the CPU
//!   that touches them. The **costs** below are assumed (orders of
//!   magnitude for a syscall and a socket re-poll on a current server),
//!   not measured; SIMULATION.md, "I/O", shows what changes when they are
//!   doubled.
//! - **[DEQUE]** crossbeam-deque's `steal_batch_and_pop` (a CAS on the
//!   victim's front index, reads of its buffer) and `Injector` (a block of
//!   63 slots): a steal touches about four cache lines of the victim plus
//!   one per eight task pointers moved.

/// How far apart two workers are: the smallest level that holds both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The same worker.
    Local,
    /// SMT siblings (one core: shared L1/L2).
    Core,
    /// The same last-level cache.
    Llc,
    /// The same NUMA node, another LLC.
    Node,
    /// The same package, another NUMA node (or another LLC where the
    /// package has a single node).
    Package,
    /// Another package (socket): remote memory.
    Remote,
}

impl Tier {
    /// All tiers, nearest first.
    pub const ALL: [Tier; 6] = [
        Tier::Local,
        Tier::Core,
        Tier::Llc,
        Tier::Node,
        Tier::Package,
        Tier::Remote,
    ];

    /// Index into per-tier arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Local => "local",
            Tier::Core => "SMT",
            Tier::Llc => "LLC",
            Tier::Node => "node",
            Tier::Package => "package",
            Tier::Remote => "remote",
        }
    }
}

/// Named cost parameters, in nanoseconds. Per-tier arrays are indexed by
/// [`Tier::index`].
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    /// A name for reports (`epyc`, `xeon`, `zero`, ...).
    pub name: String,
    /// One cache line moved from a worker at this distance (a read of its
    /// queue, idle word or load counter that misses): [C2C]. Reading a
    /// remote worker's state during a scan costs this per line.
    pub line_ns: [u64; 6],
    /// Cache lines a steal attempt touches on the victim (indices, CAS,
    /// buffer): [DEQUE]. An empty victim costs `steal_probe_lines`.
    pub steal_lines: u64,
    /// Lines read to see that a victim's queue is empty (its front and back
    /// indices): [DEQUE].
    pub steal_probe_lines: u64,
    /// Cache warmth lost when a task runs on another worker than last time,
    /// added to its next run, per tier: its working set refilled from the
    /// nearest place that holds it. Default: 256 lines (16 KiB) times the
    /// miss latency of that tier ([MEM] for L3 and DRAM, [C2C] for remote
    /// caches) divided by a memory-level parallelism of 4.
    pub warmth_ns: [u64; 6],
    /// Fixed cost of one poll (take the task, set its last worker, call
    /// its waker machinery): a few hundred instructions (estimate).
    pub poll_ns: u64,
    /// Push or pop on the worker's own deque or LIFO slot: uncontended,
    /// cache-hot (estimate: a few ns).
    pub local_queue_ns: u64,
    /// CPU the waker spends in a futex wake (`FUTEX_WAKE` syscall): [VM]
    /// and bare-metal syscall figures, ~1-2 us.
    pub wake_cpu_ns: u64,
    /// From the futex wake to the woken worker running: C-state exit plus
    /// the kernel's wakeup path, [IDLE].
    pub wake_latency_ns: u64,
    /// CPU a worker spends going to sleep (`FUTEX_WAIT` syscall and the
    /// context switch): bare-metal syscall figures, ~1-2 us.
    pub park_cpu_ns: u64,
    /// One clock read (vDSO `clock_gettime`): ~20 ns (DESIGN.md section 4).
    pub clock_ns: u64,
    /// CPU a thread outside the runtime spends per spawn besides what the
    /// model charges for the placement (claims, lines, futex wakes): the
    /// task's and its `JoinHandle`'s allocation and the spawn path's own
    /// instructions. Charged only with the spawner on the timeline
    /// ([`Config::spawner_on_timeline`](crate::Config::spawner_on_timeline)).
    /// Measured on the VM only ([`vm`](Self::vm)); 0 in the other presets.
    pub spawn_ns: u64,
    /// CPU the outside thread spends awaiting one finished task's
    /// `JoinHandle`, after its last spawn (spawner on the timeline only).
    /// Measured on the VM only; 0 in the other presets.
    pub join_ns: u64,
    /// Worker CPU per finished task besides `poll_ns` and what the model
    /// charges for queues and idling: the task's completion, its output
    /// handed to the `JoinHandle`, the deallocation. Measured on the VM
    /// only; 0 in the other presets.
    pub task_ns: u64,
    /// One `epoll_wait` on a poller, besides its events: the syscall,
    /// `ep->mtx`, the splice of the ready list under `ep->lock`; it holds
    /// the poller (serialized with every other use of that epoll
    /// instance): [EPOLL], assumed.
    pub epoll_turn_ns: u64,
    /// Per event an `epoll_wait` returns: `ep_send_events` re-polls the
    /// socket and copies the event, under `ep->mtx` (serialized on the
    /// poller): [EPOLL], assumed.
    pub epoll_event_ns: u64,
    /// Per readiness event arriving (a request's packets): the receiving
    /// CPU's `ep_poll_callback` on the poller's lock and ready list
    /// (serialized on the poller): [EPOLL], assumed.
    pub epoll_callback_ns: u64,
    /// One `epoll_ctl` (a socket moving between pollers pays two: DEL on
    /// the old, ADD on the new), under `ep->mtx` of that poller: [EPOLL],
    /// assumed.
    pub epoll_ctl_ns: u64,
    /// Cache lines of an epoll instance (its lock, its ready-list head)
    /// each use of it writes: moved from the CPU that used it last, at
    /// their distance ([`line_ns`](Self::line_ns)), on the poller's time.
    pub epoll_lines: u64,
}

impl CostModel {
    /// An AMD EPYC (Zen 3/4) two-socket server: 8-core CCX sharing an L3,
    /// several CCDs per package. [C2C], [MEM], [IDLE].
    pub fn epyc() -> Self {
        CostModel {
            name: "epyc".into(),
            // local, SMT, LLC (in-CCX), node (cross-CCD), package, remote.
            line_ns: [1, 8, 18, 80, 100, 180],
            steal_lines: 4,
            steal_probe_lines: 2,
            // 256 lines * miss latency / 4: SMT sibling shares L2 (0);
            // same L3 ~12 ns; another CCD's L3 or DRAM ~90-120 ns; remote
            // DRAM ~180 ns.
            warmth_ns: [0, 0, 770, 5_760, 7_000, 11_500],
            poll_ns: 60,
            local_queue_ns: 5,
            wake_cpu_ns: 1_500,
            wake_latency_ns: 5_000,
            park_cpu_ns: 1_500,
            clock_ns: 20,
            spawn_ns: 0,
            join_ns: 0,
            task_ns: 0,
            epoll_turn_ns: 1_000,
            epoll_event_ns: 200,
            epoll_callback_ns: 100,
            epoll_ctl_ns: 1_000,
            epoll_lines: 2,
        }
    }

    /// A two-socket Intel Xeon (Ice Lake / Sapphire Rapids): one mesh L3
    /// per package, SMT. [C2C], [MEM], [IDLE].
    pub fn xeon() -> Self {
        CostModel {
            name: "xeon".into(),
            // The mesh makes in-package transfers slower than a CCX's.
            line_ns: [1, 8, 50, 70, 80, 150],
            steal_lines: 4,
            steal_probe_lines: 2,
            warmth_ns: [0, 0, 1_300, 5_760, 6_400, 9_600],
            poll_ns: 60,
            local_queue_ns: 5,
            wake_cpu_ns: 1_500,
            wake_latency_ns: 5_000,
            park_cpu_ns: 1_500,
            clock_ns: 20,
            spawn_ns: 0,
            join_ns: 0,
            task_ns: 0,
            epoll_turn_ns: 1_000,
            epoll_event_ns: 200,
            epoll_callback_ns: 100,
            epoll_ctl_ns: 1_000,
            epoll_lines: 2,
        }
    }

    /// This project's 2-vCPU development VM (an unnamed "Intel Xeon
    /// Processor", 260 MiB L3), for the calibration in SIMULATION.md. The
    /// futex figures are the VM's own, measured by the runtime and its
    /// benches, not fitted to the results compared: a wake costs the waker
    /// ~7 us ([LL]: "send us/msg", the sender's CPU inside `try_send`); the
    /// park/unpark round trip ~26 us of CPU and ~40 us of wall time ([VM]),
    /// split here as 7 us wake + 19 us park CPU, and 40 - 26 = 14 us of
    /// wake-up latency. Cache lines: the `xeon` figures (not measured).
    ///
    ///
    /// The per-spawn and per-task costs are measured on the VM with
    /// `examples/spawn_cost.rs` (SIMULATION.md, "Calibration": the commands,
    /// the runs and the medians), each less what the model already charges
    /// for the same thing:
    /// - `spawn_ns` 228: the spawning thread's CPU per spawn, 239 ns
    ///   (`spawn_cost --workers 2` and `--workers 1`, median of 10 runs of
    ///   7 rounds), less the model's own 11 ns per spawn (its futex wakes,
    ///   `--spawner timeline`, 2 workers, with a first guess of 200 here);
    /// - `join_ns` 100: the spawner's CPU per `JoinHandle` awaited after
    ///   the spawns (same runs; the model charges nothing else for it);
    /// - `task_ns` 26: the workers' CPU per queued empty task, 98 ns
    ///   (`spawn_cost --backlog`, 1 and 2 workers, median of 5 runs each:
    ///   no idling in between), less the model's own 72 ns (poll, queue
    ///   and inbox costs: 1 worker, the whole burst queued at time 0).
    ///
    /// [LL]: the light-load bench at 213b982, hwsched on 2 workers
    /// (SIMULATION.md, "Calibration").
    pub fn vm() -> Self {
        CostModel {
            name: "vm".into(),
            wake_cpu_ns: 7_000,
            wake_latency_ns: 14_000,
            park_cpu_ns: 19_000,
            spawn_ns: 228,
            join_ns: 100,
            task_ns: 26,
            ..Self::xeon()
        }
    }

    /// Everything free except the tasks' own work: a model in which
    /// scheduling costs nothing (for sanity checks).
    pub fn zero() -> Self {
        CostModel {
            name: "zero".into(),
            line_ns: [0; 6],
            steal_lines: 0,
            steal_probe_lines: 0,
            warmth_ns: [0; 6],
            poll_ns: 0,
            local_queue_ns: 0,
            wake_cpu_ns: 0,
            wake_latency_ns: 0,
            park_cpu_ns: 0,
            clock_ns: 0,
            spawn_ns: 0,
            join_ns: 0,
            task_ns: 0,
            epoll_turn_ns: 0,
            epoll_event_ns: 0,
            epoll_callback_ns: 0,
            epoll_ctl_ns: 0,
            epoll_lines: 0,
        }
    }

    /// A preset by name: `epyc`, `xeon`, `vm` or `zero`.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "epyc" => Some(Self::epyc()),
            "xeon" => Some(Self::xeon()),
            "vm" => Some(Self::vm()),
            "zero" => Some(Self::zero()),
            _ => None,
        }
    }

    /// One cache line at distance `t`.
    pub fn line(&self, t: Tier) -> u64 {
        self.line_ns[t.index()]
    }

    /// The park/unpark round trip the idle governor compares with the
    /// predicted idle time (what the runtime measures at start-up).
    pub fn park_round_trip_ns(&self) -> u64 {
        self.wake_cpu_ns + self.wake_latency_ns + self.park_cpu_ns
    }

    /// Sets one parameter by name (`line_ns.remote=200`, `wake_latency_ns=3000`);
    /// for the CLI's `--cost`.
    pub fn set(&mut self, key: &str, value: u64) -> Result<(), String> {
        if let Some((array, tier)) = key.split_once('.') {
            let t = Tier::ALL
                .iter()
                .find(|t| t.name().eq_ignore_ascii_case(tier))
                .ok_or_else(|| format!("unknown tier {tier:?}"))?;
            let a = match array {
                "line_ns" => &mut self.line_ns,
                "warmth_ns" => &mut self.warmth_ns,
                _ => return Err(format!("unknown per-tier parameter {array:?}")),
            };
            a[t.index()] = value;
            return Ok(());
        }
        let f = match key {
            "steal_lines" => &mut self.steal_lines,
            "steal_probe_lines" => &mut self.steal_probe_lines,
            "poll_ns" => &mut self.poll_ns,
            "local_queue_ns" => &mut self.local_queue_ns,
            "wake_cpu_ns" => &mut self.wake_cpu_ns,
            "wake_latency_ns" => &mut self.wake_latency_ns,
            "park_cpu_ns" => &mut self.park_cpu_ns,
            "clock_ns" => &mut self.clock_ns,
            "spawn_ns" => &mut self.spawn_ns,
            "join_ns" => &mut self.join_ns,
            "task_ns" => &mut self.task_ns,
            "epoll_turn_ns" => &mut self.epoll_turn_ns,
            "epoll_event_ns" => &mut self.epoll_event_ns,
            "epoll_callback_ns" => &mut self.epoll_callback_ns,
            "epoll_ctl_ns" => &mut self.epoll_ctl_ns,
            "epoll_lines" => &mut self.epoll_lines,
            _ => return Err(format!("unknown cost parameter {key:?}")),
        };
        *f = value;
        Ok(())
    }
}

impl Default for CostModel {
    fn default() -> Self {
        Self::epyc()
    }
}
