//! hackbench (`perf bench sched messaging`, pipe mode) as tasks.
//!
//! Each group has `fds` receivers, each owning one bounded pipe of
//! `65536 / datasize` messages, and `fds` senders; every sender writes
//! `loops` messages of `datasize` bytes to each receiver of its group in
//! turn, so each receiver reads `fds * loops` messages. All tasks are
//! started, report ready, and are released together; the time is measured
//! from the release until every receiver is done (as hackbench does).
//!
//! Needs the `rt` module (`benches/common/rt.rs`) at the crate root.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use crate::rt::Rt;

/// hackbench's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub groups: usize,
    pub fds: usize,
    pub loops: usize,
    pub datasize: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            groups: 10,
            fds: 20,
            loops: 100,
            datasize: 100,
        }
    }
}

impl Config {
    /// Messages passed in one run.
    pub fn messages(&self) -> u64 {
        (self.groups * self.fds * self.fds * self.loops) as u64
    }

    /// Tasks in one run.
    pub fn tasks(&self) -> usize {
        self.groups * self.fds * 2
    }

    /// Capacity of one pipe, in messages (a 64 KiB pipe).
    pub fn pipe_capacity(&self) -> usize {
        (65536 / self.datasize.max(1)).max(1)
    }
}

async fn receiver(
    pipe: async_channel::Receiver<Vec<u8>>,
    messages: usize,
    datasize: usize,
    ready: async_channel::Sender<()>,
    gate: async_channel::Receiver<()>,
) -> u64 {
    ready.send(()).await.expect("ready channel closed");
    drop(ready);
    let _ = gate.recv().await;
    let mut bytes = 0u64;
    for i in 0..messages {
        let m = match pipe.recv().await {
            Ok(m) => m,
            Err(_) => panic!("hackbench: pipe closed after {i} of {messages} messages"),
        };
        assert_eq!(m.len(), datasize, "hackbench: short message");
        bytes += m.len() as u64;
    }
    bytes
}

async fn sender(
    pipes: Vec<async_channel::Sender<Vec<u8>>>,
    loops: usize,
    datasize: usize,
    ready: async_channel::Sender<()>,
    gate: async_channel::Receiver<()>,
) {
    ready.send(()).await.expect("ready channel closed");
    drop(ready);
    let _ = gate.recv().await;
    let data = vec![0x5au8; datasize];
    for _ in 0..loops {
        for p in &pipes {
            p.send(data.clone())
                .await
                .expect("hackbench: receiver gone early");
        }
    }
}

/// One hackbench run on `rt`; returns the time from release to the last
/// receiver done. Panics if a message is lost.
pub fn run(rt: &Rt, cfg: &Config) -> Duration {
    let (ready_tx, ready_rx) = async_channel::unbounded::<()>();
    let (gate_tx, gate_rx) = async_channel::bounded::<()>(1);
    let mut receivers = Vec::with_capacity(cfg.groups * cfg.fds);
    let mut senders = Vec::with_capacity(cfg.groups * cfg.fds);
    for _ in 0..cfg.groups {
        let mut pipes = Vec::with_capacity(cfg.fds);
        for _ in 0..cfg.fds {
            let (tx, rx) = async_channel::bounded::<Vec<u8>>(cfg.pipe_capacity());
            pipes.push(tx);
            receivers.push(rt.spawn(receiver(
                rx,
                cfg.fds * cfg.loops,
                cfg.datasize,
                ready_tx.clone(),
                gate_rx.clone(),
            )));
        }
        for _ in 0..cfg.fds {
            senders.push(rt.spawn(sender(
                pipes.clone(),
                cfg.loops,
                cfg.datasize,
                ready_tx.clone(),
                gate_rx.clone(),
            )));
        }
    }
    drop(ready_tx);
    drop(gate_rx);
    let tasks = cfg.tasks();
    let expect = (cfg.fds * cfg.loops * cfg.datasize) as u64;
    rt.block_on(async move {
        for _ in 0..tasks {
            ready_rx
                .recv()
                .await
                .expect("a hackbench task died before ready");
        }
        let t0 = Instant::now();
        gate_tx.close();
        for r in receivers {
            assert_eq!(r.await, expect, "hackbench: receiver byte count");
        }
        let elapsed = t0.elapsed();
        for s in senders {
            s.await;
        }
        elapsed
    })
}
