//! The scheduling protocols, written once over small views so that the
//! runtime and the loom models of `loom-tests/` run the same steps: the
//! queues, the parker and its mailbox, the sleepers (the wake protocol's
//! shared state), the pusher's steps, the idle worker's steps, the place
//! queues, the load counters, the watch over the driver's private batches,
//! and the shutdown sequence. Below the worker that drives them; above the
//! policies they consult. The protocols themselves, each one's steps
//! numbered once, are in src/sched/README.md.

// Private, but public under `cfg(loom)` so the models check the production
// code.
macro_rules! protocol {
    ($($m:ident),* $(,)?) => {$(
        #[cfg(loom)]
        pub mod $m;
        #[cfg(not(loom))]
        pub(crate) mod $m;
    )*};
}

protocol!(
    idle_steps,
    load_map,
    park,
    place_queue,
    push,
    queue,
    shutdown,
    sleepers,
    watch
);
