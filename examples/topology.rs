//! Prints a domain tree: this machine's, or that of a synthetic description
//! or an lstopo XML file. Each level line names its kind (SMT, cluster, LLC,
//! NUMA, package, NUMA group n, machine); the header gives the workers'
//! capacities, and on a hybrid machine each worker line gives its own.
//!
//! ```text
//! cargo run --example topology
//! cargo run --example topology -- --synthetic "pack:2 l3:2 core:4 pu:2"
//! cargo run --example topology -- --xml machine.xml [--workers 4]
//! cargo run --example topology -- --xml tests/topologies/gb10-hybrid.xml --workers 10
//! ```

use hwsched::{Topology, TopologySource};

fn main() {
    let mut source = TopologySource::System;
    let mut workers = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("{name} needs a value");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--synthetic" => source = TopologySource::Synthetic(value("--synthetic")),
            "--xml" => source = TopologySource::Xml(value("--xml").into()),
            "--workers" => {
                let v = value("--workers");
                workers = Some(v.parse().unwrap_or_else(|_| {
                    eprintln!("--workers {v:?} is not a number");
                    std::process::exit(2)
                }))
            }
            "-h" | "--help" => {
                println!("usage: topology [--synthetic \"<desc>\" | --xml <file>] [--workers N]");
                return;
            }
            other => {
                eprintln!("unknown argument {other:?} (try --help)");
                std::process::exit(2)
            }
        }
    }
    match Topology::new(&source, workers) {
        Ok(t) => {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = write!(std::io::stdout().lock(), "{t}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1)
        }
    }
}
