//! `#[hwsched::main]` and `#[hwsched::test]`: the runtime they build has
//! the workers and topology asked for, is fresh for each test, and runs the
//! body with `block_on` (tasks spawned there run on its workers); a body
//! may return a `Result` and use `?`; a panic in the body, or a runtime
//! that cannot be built, fails the test with its message.
//!
//! The compile errors (bad options, functions the attributes do not take)
//! are checked by the unit tests and `compile_fail` doc tests of
//! `macros/`.
//!
//! `cargo test --test macros`.

use std::num::ParseIntError;

use hwsched::Handle;

fn workers() -> usize {
    Handle::current().stats().workers.len()
}

#[hwsched::test(worker_threads = 1)]
async fn one_worker() {
    assert_eq!(workers(), 1);
}

#[hwsched::test(worker_threads = 2)]
async fn two_workers_and_tasks_run_on_them() {
    assert_eq!(workers(), 2);
    // The body runs on the test's thread; tasks run on the workers.
    assert_eq!(hwsched::worker_index(), None);
    let on = hwsched::spawn(async { hwsched::worker_index() })
        .await
        .unwrap();
    assert!(matches!(on, Some(0 | 1)), "{on:?}");
}

#[hwsched::test(topology = "pack:2 l3:2 core:4 pu:2")]
async fn a_synthetic_topology_gives_its_workers_and_levels() {
    let stats = Handle::current().stats();
    assert_eq!(stats.workers.len(), 32);
    assert_eq!(stats.level_names, ["SMT", "LLC", "package", "machine"]);
}

#[hwsched::test(topology = "pack:2 core:4 pu:1", worker_threads = 3)]
async fn worker_threads_applies_to_the_topology() {
    let stats = Handle::current().stats();
    assert_eq!(stats.workers.len(), 3);
    assert_eq!(stats.level_names, ["package", "machine"]);
}

#[hwsched::test(
    worker_threads = 6,
    topology = "tests/topologies/raptorlake-hybrid.xml"
)]
async fn a_path_ending_in_xml_is_read_as_an_export() {
    let stats = Handle::current().stats();
    assert_eq!(stats.workers.len(), 6);
    // The six P-cores of the i7-1370P: one worker each, so no SMT level.
    assert!(
        !stats.level_names.contains(&"SMT"),
        "{:?}",
        stats.level_names
    );
}

#[hwsched::test(worker_threads = 2)]
async fn each_test_gets_a_fresh_runtime() {
    // Other tests of this file run at the same time, each on a runtime of
    // its own: none of their tasks is counted here.
    assert_eq!(Handle::current().stats().spawned, 0);
    hwsched::spawn(async {}).await.unwrap();
    assert_eq!(Handle::current().stats().spawned, 1);
}

#[hwsched::test(worker_threads = 1)]
async fn a_test_may_return_a_result_and_use_the_question_mark() -> Result<(), ParseIntError> {
    let n: u32 = "21".parse()?;
    let doubled = hwsched::spawn(async move { n * 2 }).await.unwrap();
    assert_eq!(doubled, 42);
    Ok(())
}

#[hwsched::test(worker_threads = 1)]
#[should_panic(expected = "a panic in the body")]
async fn a_panic_in_the_body_fails_the_test() {
    hwsched::yield_now().await;
    panic!("a panic in the body");
}

#[hwsched::test(worker_threads = 1)]
#[should_panic(expected = "boom")]
async fn a_panicking_task_awaited_with_unwrap_fails_the_test() {
    hwsched::spawn(async { panic!("boom") }).await.unwrap();
}

#[hwsched::test(topology = "pack:1 core:2 pu:1", worker_threads = 64)]
#[should_panic(
    expected = "#[hwsched::test] could not build the runtime: worker_threads(64): the topology \
                has only 2 allowed PUs"
)]
async fn a_runtime_that_cannot_be_built_fails_with_the_build_error() {
    unreachable!("the runtime was built");
}

#[hwsched::test(worker_threads = 1)]
async fn inner_attributes_of_the_body_apply() {
    #![allow(clippy::let_unit_value)]
    let unit = ();
    assert_eq!(unit, ());
}

/// What a crate that re-exports hwsched passes as `crate`.
mod reexport {
    pub use ::hwsched as rt;
}

#[hwsched::test(crate = "reexport::rt", worker_threads = 1)]
async fn the_crate_option_names_the_path_to_hwsched() {
    assert_eq!(workers(), 1);
}

// `#[hwsched::main]` on a function other than `main`: it may take
// arguments, and returns the body's value.
#[hwsched::main(worker_threads = 2)]
async fn parse_and_double(s: &str) -> Result<u64, ParseIntError> {
    assert_eq!(workers(), 2);
    let n: u64 = s.parse()?;
    Ok(hwsched::spawn(async move { n * 2 }).await.unwrap())
}

#[test]
fn main_runs_the_body_on_its_runtime_and_returns_its_result() {
    assert!(Handle::try_current().is_none());
    assert_eq!(parse_and_double("21"), Ok(42));
    assert!(parse_and_double("x").is_err());
    // The runtime is gone with the call.
    assert!(Handle::try_current().is_none());
}
