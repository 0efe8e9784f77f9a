//! A small in-memory key-value service with one shard per NUMA node.
//!
//! Each shard's map is created by a task placed on its node
//! (`spawn_on(Place::Numa(node), ..)`), so on a real NUMA machine its memory
//! is first touched, and so allocated, there; every request for a key is
//! routed to its shard's node the same way, and runs only on that node's
//! workers (stealing never moves a placed task off its place). At the end
//! the program prints, from `Runtime::stats`, how many polls placed tasks
//! had and that none ran off its place, and checks every reply.
//!
//! ```text
//! cargo run --release --example sharded_kv [-- --requests 200000] [--topology SPEC]
//! ```
//!
//! With `--topology` a synthetic hwloc topology is used (default on a
//! machine with one node: `pack:2 [numa] core:4 pu:2`, two nodes of four
//! cores with two threads each); `--topology system` uses this machine's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hwsched::{LevelKind, Place, Runtime, TopologySource};

/// One shard: its node and its map, behind a lock taken only by tasks on
/// that node (so the lock's cache line stays on the node too).
struct Shard {
    node: usize,
    map: Mutex<HashMap<u64, u64>>,
}

/// The shard a key lives in: a multiplicative hash, then the node.
fn shard_of(key: u64, shards: usize) -> usize {
    ((key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % shards as u64) as usize
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let val = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let requests: u64 = val("--requests").map_or(200_000, |v| {
        v.parse().unwrap_or_else(|_| {
            eprintln!("--requests takes a number, not {v:?}");
            std::process::exit(2)
        })
    });
    let source = match val("--topology").as_deref() {
        Some("system") => TopologySource::System,
        Some(spec) => TopologySource::Synthetic(spec.into()),
        None => {
            let here = Runtime::builder()
                .build()
                .expect("a runtime on this machine");
            let nodes = here
                .topology()
                .domains(LevelKind::Numa)
                .map_or(1, |d| d.len());
            drop(here);
            if nodes > 1 {
                TopologySource::System
            } else {
                TopologySource::Synthetic("pack:2 [numa] core:4 pu:2".into())
            }
        }
    };
    let rt = Runtime::builder()
        .topology(source)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("sharded_kv: {e}");
            std::process::exit(2)
        });
    let nodes = rt
        .topology()
        .domains(LevelKind::Numa)
        .expect("NUMA nodes are a domain kind");
    println!(
        "{} workers, {} NUMA nodes: {:?}",
        rt.workers(),
        nodes.len(),
        nodes
    );

    // Each shard is built on its node: the map's first allocation happens
    // there.
    let shards: Vec<Arc<Shard>> = (0..nodes.len())
        .map(|node| {
            let h = rt
                .spawn_on(Place::Numa(node), async move {
                    let here = hwsched::current_place().expect("a placed task runs on a worker");
                    assert_eq!(here.numa, node, "a shard is built on its node");
                    Arc::new(Shard {
                        node,
                        map: Mutex::new(HashMap::with_capacity(1 << 16)),
                    })
                })
                .expect("every node of the topology has workers");
            rt.block_on(h).expect("the shard's task completes")
        })
        .collect();
    let shards = Arc::new(shards);

    let t0 = Instant::now();
    let sum = rt.block_on({
        let shards = shards.clone();
        async move {
            // Puts, then gets of the same keys: each request is a task on
            // its key's node.
            let mut puts = Vec::with_capacity(requests as usize);
            for key in 0..requests {
                let shard = shards[shard_of(key, shards.len())].clone();
                let node = shard.node;
                puts.push(
                    hwsched::spawn_on(Place::Numa(node), async move {
                        let here = hwsched::current_place().expect("on a worker");
                        assert_eq!(here.numa, shard.node, "a request runs on its shard's node");
                        shard.map.lock().unwrap().insert(key, key * 2);
                    })
                    .expect("a valid place"),
                );
            }
            for p in puts {
                p.await.expect("a put completes");
            }
            let mut gets = Vec::with_capacity(requests as usize);
            for key in 0..requests {
                let shard = shards[shard_of(key, shards.len())].clone();
                let node = shard.node;
                gets.push(
                    hwsched::spawn_on(Place::Numa(node), async move {
                        shard.map.lock().unwrap().get(&key).copied()
                    })
                    .expect("a valid place"),
                );
            }
            let mut sum = 0u64;
            for (key, g) in gets.into_iter().enumerate() {
                let v = g.await.expect("a get completes");
                assert_eq!(v, Some(key as u64 * 2), "key {key} reads back what was put");
                sum += v.unwrap_or(0);
            }
            sum
        }
    });
    let elapsed = t0.elapsed();
    let per_shard: Vec<usize> = shards.iter().map(|s| s.map.lock().unwrap().len()).collect();
    println!(
        "{} puts and {} gets in {:.1} ms ({:.0} requests/s); keys per shard {:?}; sum {}",
        requests,
        requests,
        elapsed.as_secs_f64() * 1e3,
        (2 * requests) as f64 / elapsed.as_secs_f64(),
        per_shard,
        sum
    );

    let t = rt.stats().total();
    println!(
        "placed on a NUMA node: {} polls, {} off their place; {} taken from the nodes' place queues",
        t.placed_polls_numa, t.placed_polls_off, t.placed_pulls
    );
    assert_eq!(t.placed_polls_off, 0, "no task of a shard ran off its node");
    println!("no task of a shard ran off its node");
}
