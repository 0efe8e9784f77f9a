//! Loom models of hwsched protocols live in `tests/`; this crate has no code of its own.
