//! hwsched and the newest tokio in one program.
//!
//! This crate has no code of its own: its manifest asks for the newest
//! tokio and hyper beside hwsched, so the workspace resolves only while
//! hwsched's dependency ranges allow them, and its tests run both runtimes
//! in one process.
