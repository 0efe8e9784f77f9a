//! `hwsched-sim`: run one workload under one policy on one topology and
//! print the report. `hwsched-sim --help` lists the options.

use std::process::ExitCode;
use std::time::Duration;

use hwsched::{LevelKind, SisMode, StealWalk, Topology, TopologySource};
use hwsched_sim::sim::parse_idle;
use hwsched_sim::workload::{
    Burst, ForkJoin, Hackbench, Io, Light, PingPong, Shards, Trace, Workload,
};
use hwsched_sim::{simulate, Config, CostModel, Policy, Pollers};

const HELP: &str = "\
hwsched-sim: hwsched's scheduling policies on a simulated machine, in virtual time

topology (one of):
  --preset NAME        epyc   = pack:2 l3:8 core:8 pu:1   (128 workers, 8-core LLCs)
                       xeon   = pack:2 l3:1 core:20 pu:2  (80 workers, SMT, LLC per socket)
                       numa   = pack:2 numa:2 l3:2 core:4 pu:2 (64 workers, 4 nodes)
                       small  = pack:1 l3:1 core:2 pu:1   (2 workers)
  --synthetic STR      an hwloc synthetic description
  --xml PATH           an lstopo XML export
  --workers N          use N workers of the topology
  --show-topology      print the domain tree first

workload (--workload NAME, default hackbench):
  hackbench   --groups G (4) --fds F (10) --loops L (50) --send-ns (500) --recv-ns (500)
  burst       --bursts B (10) --tasks N (4 x workers) --work-us W (20) --period-us P (200) --jitter PCT (20)
              (--period-ns P, --work-ns W: in ns; --bursts 100000 --tasks 1 --period-ns 440
              is a spawner that spawns one task every 440 ns)
  independent --tasks N (8 x workers) --work-us W (100): one burst, no communication
  pingpong    --pairs P (workers / 2) --trips R (500) --work-ns W (500)
  light       --load X (0.25) or --period-us P, --receivers R (2 x workers) --work-us W (20) --messages N (20000)
  forkjoin    --depth D (12) --leaf-us W (5) --node-ns W (200)
  trace       --trace FILE: replay tasks, runs and wake edges (format: sim/src/workload.rs, `Trace`)
  io          --conns C (16 x workers) --load X (0.5) or --rate R (requests/s) --work-ns W (10000)
              --requests N (1000 x workers, at least 100000): a server: C sockets, Poisson requests through the
              I/O driver's pollers (--pollers), W of work each (SIMULATION.md, I/O)
  shards      --bursts B (10) --requests R (2 x workers) --fanout F (4) --work-us W (10)
              --period-us P (200) --remote-pct X (50) --hot-pct H (even shards): one shard per
              NUMA node; each request spawns F subtasks of its shard, every run costs X% more
              off its shard's node; H% of each burst on shard 0 (SIMULATION.md, Places)

policy:
  --policy hwsched|tokio   (hwsched)
  --sis prop|util|full|off (prop)      --walk bounded|unbounded (bounded)
  --idle park|governed|spin:US (park)  --recent on|off  --idle-core on|off
  --load-interval-us N (1000)          --migration-cost-us N (500)
  --fix-recheck on|off (on)   the re-check fix the runtime adopted (SIMULATION.md, Findings)
  --fix-park-bit on|off (off) a proposed change: leave the queued set before sleeping
  --pollers one|llc|numa (one) the I/O driver's pollers (Builder::io_pollers), for
                 a workload that uses sockets (io)
  --foreign-pollers on|off (on) on: an idle worker whose own poller is taken sleeps in
                 another domain's (the runtime); off: on its thread (a variant)
  --rehome on|off (on) on: a socket moves to the poller of the domain its task keeps
                 waiting in (the runtime); off: it stays where it was accepted
  --places on|off (off) tasks with a home node (shards) run only on its workers, as
                 spawn_on(Place::Numa(node)) places them
  --place-wake searcher|per-task (searcher) with places: a queued placed task wakes a
                 parked worker of its place when none there is awake and idle, and each
                 worker that takes one and leaves more wakes the next (searcher); or one
                 awake idle worker per queued task (per-task, a variant)
  --accept-cpus K (0)  io: the k-th socket is accepted on CPU k mod K (0: all workers);
                 1: every socket in the first CPU's domain
  --spawner free|timeline (free) timeline: the outside thread (spawner, sender) is a
                 simulated thread: one action at a time, each paying the placement and
                 the cost model's spawn_ns, then join_ns per task spawned; free: its
                 actions happen at the instant asked, at no cost to the timeline

model:
  --costs epyc|xeon|vm|zero (epyc)  --cost KEY=NS (repeatable, e.g. line_ns.remote=300)
  --seed N (1)

output (default: the full report, ending with hwsched's own Stats table
as Runtime::stats() prints it):
  --row          one markdown table row instead of the full report:
                 | label | makespan ms | ops/s | p50 us | p99 us | sched/work | idle-while-queued | cross-LLC migrations |
                 (shards: | label | makespan ms | idle-while-queued | the same inside the places |
                  runs off their home node | cross-node migrations | remote ms | sched/work |)
                 (io: | label | pollers | requests/s | p50 us | p99 us | busiest poller | mean poller |
                  events per epoll_wait | events to another LLC | searcher wakes across LLCs | cross-LLC migrations |)
  --label TEXT   the row's first cell (default: the policy)
";

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hwsched-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Args(Vec<(String, String)>, Vec<String>);

impl Args {
    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    fn all<'a>(&'a self, k: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    fn num<T: std::str::FromStr>(&self, k: &str, default: T) -> Result<T, String> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{k}: not a number: {v:?}")),
        }
    }
    fn flag(&self, k: &str) -> bool {
        self.1.iter().any(|f| f == k)
    }
}

const FLAGS: &[&str] = &["show-topology", "help", "row"];

fn parse() -> Result<Args, String> {
    let mut kv = Vec::new();
    let mut flags = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let Some(k) = a.strip_prefix("--") else {
            return Err(format!("unexpected argument {a:?} (see --help)"));
        };
        if FLAGS.contains(&k) {
            flags.push(k.to_string());
            continue;
        }
        let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
        kv.push((k.to_string(), v));
    }
    Ok(Args(kv, flags))
}

fn on_off(v: Option<&str>, default: bool) -> Result<bool, String> {
    match v {
        None => Ok(default),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(x) => Err(format!("expected on or off, got {x:?}")),
    }
}

fn real_main() -> Result<(), String> {
    let a = parse()?;
    if a.flag("help") {
        print!("{HELP}");
        return Ok(());
    }
    let source = if let Some(p) = a.get("xml") {
        TopologySource::Xml(p.into())
    } else if let Some(s) = a.get("synthetic") {
        TopologySource::Synthetic(s.into())
    } else {
        let s = match a.get("preset").unwrap_or("epyc") {
            "epyc" => "pack:2 l3:8 core:8 pu:1",
            "xeon" => "pack:2 l3:1 core:20 pu:2",
            "numa" => "pack:2 numa:2 l3:2 core:4 pu:2",
            "small" => "pack:1 l3:1 core:2 pu:1",
            p => return Err(format!("unknown preset {p:?}")),
        };
        TopologySource::Synthetic(s.into())
    };
    let workers = a.get("workers").map(|_| a.num("workers", 0)).transpose()?;
    let topo = Topology::new(&source, workers).map_err(|e| e.to_string())?;
    if a.flag("show-topology") {
        println!("{topo}");
    }
    let n = topo.workers();
    let mut cfg = Config::new(topo);
    cfg.seed = a.num("seed", 1)?;
    cfg.recheck_wakes_for_others = on_off(a.get("fix-recheck"), true)?;
    cfg.park_clears_queued = on_off(a.get("fix-park-bit"), false)?;
    cfg.spawner_on_timeline = match a.get("spawner").unwrap_or("free") {
        "free" => false,
        "timeline" => true,
        s => return Err(format!("unknown --spawner {s:?}")),
    };
    cfg.pollers = {
        let p = a.get("pollers").unwrap_or("one");
        Pollers::parse(p).ok_or_else(|| format!("unknown --pollers {p:?}"))?
    };
    cfg.foreign_pollers = on_off(a.get("foreign-pollers"), true)?;
    cfg.rehome = on_off(a.get("rehome"), true)?;
    cfg.accept_cpus = a.num("accept-cpus", 0)?;
    cfg.places = on_off(a.get("places"), false)?;
    cfg.place_wake_per_task = match a.get("place-wake").unwrap_or("searcher") {
        "searcher" => false,
        "per-task" => true,
        s => return Err(format!("unknown --place-wake {s:?}")),
    };
    cfg.policy = match a.get("policy").unwrap_or("hwsched") {
        "hwsched" => Policy::Hwsched,
        "tokio" => Policy::TokioLike,
        p => return Err(format!("unknown policy {p:?}")),
    };
    let t = &mut cfg.tunables;
    t.sis = match a.get("sis").unwrap_or("prop") {
        "prop" => SisMode::Prop,
        "util" => SisMode::Util,
        "full" => SisMode::Full,
        "off" => SisMode::Off,
        s => return Err(format!("unknown --sis {s:?}")),
    };
    t.walk = match a.get("walk").unwrap_or("bounded") {
        "bounded" => StealWalk::Bounded,
        "unbounded" => StealWalk::Unbounded,
        s => return Err(format!("unknown --walk {s:?}")),
    };
    if let Some(i) = a.get("idle") {
        t.idle = parse_idle(i).ok_or_else(|| format!("unknown --idle {i:?}"))?;
    }
    t.sis_recent_used = on_off(a.get("recent"), t.sis_recent_used)?;
    t.sis_idle_core = on_off(a.get("idle-core"), t.sis_idle_core)?;
    t.load_update_interval = Duration::from_micros(a.num("load-interval-us", 1000)?);
    t.migration_cost = Duration::from_micros(a.num("migration-cost-us", 500)?);
    t.validate().map_err(|e| e.to_string())?;
    let costs = a.get("costs").unwrap_or("epyc");
    cfg.cost = CostModel::preset(costs).ok_or_else(|| format!("unknown --costs {costs:?}"))?;
    for kv in a.all("cost") {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--cost wants KEY=NS, got {kv:?}"))?;
        let v: u64 = v.parse().map_err(|_| format!("--cost {k}: not a number"))?;
        cfg.cost.set(k, v)?;
        cfg.cost.name = format!("{}+{kv}", cfg.cost.name);
    }
    let us = |k: &str, d: u64| a.num(k, d).map(|v| v * 1000);
    let w: Box<dyn Workload> = match a.get("workload").unwrap_or("hackbench") {
        "hackbench" => Box::new(Hackbench::new(
            a.num("groups", 4)?,
            a.num("fds", 10)?,
            a.num("loops", 50)?,
            a.num("send-ns", 500)?,
            a.num("recv-ns", 500)?,
        )),
        "burst" => Box::new(Burst::new(
            a.num("bursts", 10)?,
            a.num("tasks", 4 * n as u64)?,
            match a.get("work-ns") {
                Some(_) => a.num("work-ns", 0)?,
                None => us("work-us", 20)?,
            },
            a.num("jitter", 20)?,
            match a.get("period-ns") {
                Some(_) => a.num("period-ns", 0)?,
                None => us("period-us", 200)?,
            },
        )),
        "independent" => Box::new(Burst::new(
            1,
            a.num("tasks", 8 * n as u64)?,
            us("work-us", 100)?,
            0,
            0,
        )),
        "pingpong" => Box::new(PingPong::new(
            a.num("pairs", (n / 2).max(1))?,
            a.num("trips", 500)?,
            a.num("work-ns", 500)?,
        )),
        "light" => {
            let r = a.num("receivers", 2 * n)?;
            let work = us("work-us", 20)?;
            let load: f64 = a.num("load", 0.25)?;
            if !(load > 0.0 && load <= 4.0) {
                return Err("--load must be in (0, 4]".into());
            }
            let period = match a.get("period-us") {
                Some(_) => us("period-us", 0)?.max(1),
                None => Light::period_for(work, n, load),
            };
            Box::new(Light::new(r, period, work, a.num("messages", 20_000)?))
        }
        "forkjoin" => Box::new(ForkJoin::new(
            a.num("depth", 12)?,
            us("leaf-us", 5)?,
            a.num("node-ns", 200)?,
        )),
        "io" => {
            let work = a.num("work-ns", 10_000)?;
            let rate = match a.get("rate") {
                Some(_) => a.num("rate", 0.0)?,
                None => {
                    let load: f64 = a.num("load", 0.5)?;
                    if !(load > 0.0 && load <= 4.0) {
                        return Err("--load must be in (0, 4]".into());
                    }
                    Io::rate_for(work, n, load)
                }
            };
            if !(rate > 0.0 && rate.is_finite()) {
                return Err("--rate must be positive".into());
            }
            Box::new(Io::new(
                a.num("conns", 16 * n)?,
                rate,
                work,
                a.num("requests", (1000 * n as u64).max(100_000))?,
            ))
        }
        "shards" => {
            let nodes = cfg.topology.domains(LevelKind::Numa).map_or(1, |d| d.len());
            let mut w = Shards::new(nodes);
            w.bursts = a.num("bursts", w.bursts)?;
            w.requests = a.num("requests", 2 * n as u64)?;
            w.fanout = a.num("fanout", w.fanout)?;
            w.work_ns = match a.get("work-ns") {
                Some(_) => a.num("work-ns", 0)?,
                None => us("work-us", 10)?,
            };
            w.period_ns = us("period-us", 200)?;
            w.remote_pct = a.num("remote-pct", w.remote_pct)?;
            w.hot_pct = a.get("hot-pct").map(|_| a.num("hot-pct", 0)).transpose()?;
            if w.hot_pct.is_some_and(|p| p > 100) {
                return Err("--hot-pct must be at most 100".into());
            }
            Box::new(w)
        }
        "trace" => {
            let p = a
                .get("trace")
                .ok_or("--workload trace needs --trace FILE")?;
            let text = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
            Box::new(Trace::parse(&text)?)
        }
        x => return Err(format!("unknown workload {x:?}")),
    };
    let r = simulate(cfg, w);
    if a.flag("row") {
        let label = a
            .get("label")
            .map_or_else(|| r.policy.clone(), str::to_string);
        if r.io.is_some() {
            println!("{}", r.io_row(&label));
        } else if r.homed_runs > 0 {
            println!("{}", r.numa_row(&label));
        } else {
            println!("{}", r.row(&label));
        }
    } else {
        print!("{r}");
    }
    Ok(())
}
