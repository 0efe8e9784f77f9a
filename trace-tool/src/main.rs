//! `hwsched-trace`: renders a hwsched scheduler trace (Chrome Trace Event
//! JSON, from `hwsched::trace::Trace::write_chrome_json`) as an SVG
//! timeline, or prints its summary.
//!
//! ```text
//! hwsched-trace svg TRACE.json OUT.svg
//! hwsched-trace summary TRACE.json
//! ```

use std::process::exit;

const USAGE: &str = "\
usage: hwsched-trace svg TRACE.json OUT.svg
       hwsched-trace summary TRACE.json

svg      an SVG timeline: a lane per worker in topology order and one per
         block_on thread, polls coloured by their task's spawn location,
         parks and steals marked
summary  per-worker and per-block_on-thread busy share, run-queue delay percentiles, the longest
         polls with their spawn locations, steals per level, wakes by
         placement decision";

fn read(path: &str) -> hwsched_trace::Trace {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("hwsched-trace: {path}: {e}");
        exit(1)
    });
    hwsched_trace::parse(&text).unwrap_or_else(|e| {
        eprintln!("hwsched-trace: {path}: {e}");
        exit(1)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["svg", input, out] => {
            let t = read(input);
            if let Err(e) = std::fs::write(out, hwsched_trace::svg(&t)) {
                eprintln!("hwsched-trace: {out}: {e}");
                exit(1);
            }
        }
        ["summary", input] => print!("{}", hwsched_trace::summary(&read(input))),
        ["-h"] | ["--help"] => println!("{USAGE}"),
        _ => {
            eprintln!("{USAGE}");
            exit(2);
        }
    }
}
