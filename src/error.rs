//! Errors returned when a runtime or a topology cannot be built.

use std::fmt;
use std::path::PathBuf;

/// Why [`Builder::build`](crate::Builder::build) (or [`Topology::new`](crate::Topology::new))
/// refused to build.
///
/// Every variant names the value that was wrong, so the message alone tells
/// a user what to change. Nothing in the build path panics or silently falls
/// back to a default.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `worker_threads(0)` was requested.
    ZeroWorkers,
    /// More workers were requested than the topology has allowed PUs.
    TooManyWorkers {
        /// The requested worker count.
        requested: usize,
        /// How many PUs the topology allows.
        available: usize,
    },
    /// A synthetic topology description was refused: by hwloc, or by
    /// hwsched before hwloc saw it (over the size limits, or a form hwloc
    /// would abort on; see
    /// [`TopologySource::Synthetic`](crate::TopologySource::Synthetic)).
    InvalidSynthetic {
        /// The description as given.
        description: String,
        /// What hwloc or hwsched said about it.
        reason: String,
    },
    /// An XML topology file could not be loaded.
    InvalidXml {
        /// The path as given.
        path: PathBuf,
        /// Why it was refused: missing or unreadable, not a regular file
        /// (a directory, a FIFO, a device), larger than
        /// [`MAX_XML_BYTES`](crate::topology::MAX_XML_BYTES), not UTF-8,
        /// not well-formed, not an hwloc 2 XML export, no PU, two PUs with
        /// one OS index, over the limits of
        /// [`TopologySource::Xml`](crate::TopologySource::Xml), or refused
        /// by hwloc.
        reason: String,
    },
    /// The set of CPUs to run on is empty (an empty `cpus(..)` list, or no
    /// allowed CPU left after intersecting with the process's affinity).
    EmptyCpuset {
        /// Where the empty set came from.
        context: String,
    },
    /// A CPU requested with [`Builder::cpus`](crate::Builder::cpus) is not a
    /// PU of the topology (or not allowed for this process).
    CpuOutsideTopology {
        /// The OS index that was requested.
        cpu: usize,
        /// The OS indices the topology allows.
        available: Vec<usize>,
    },
    /// A tunable is out of its valid range.
    InvalidTunable {
        /// The field of [`Tunables`](crate::Tunables).
        name: &'static str,
        /// The value given, formatted.
        value: String,
        /// What range is accepted.
        expected: &'static str,
    },
    /// A [`Builder`](crate::Builder) option is out of its valid range.
    InvalidOption {
        /// The builder method, e.g. `thread_stack_size`.
        name: &'static str,
        /// The value given, formatted.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// The thread name is not usable (contains a NUL byte).
    InvalidThreadName {
        /// The name given.
        name: String,
    },
    /// hwloc failed for a reason other than bad input.
    Hwloc(String),
    /// A worker thread could not be spawned.
    ThreadSpawn(std::io::Error),
    /// The I/O driver's descriptors (per poller: an epoll instance, its
    /// duplicate and an eventfd) could not be opened, e.g. `EMFILE` with
    /// the process out of descriptors. `build` opens them, so that no
    /// socket or timer fails (or panics) for want of them later; a runtime
    /// built with [`enable_io(false)`](crate::Builder::enable_io) opens
    /// none.
    IoDriver(std::io::Error),
    /// The tokio bridge ([`Builder::tokio_compat`](crate::Builder::tokio_compat))
    /// could not be built: tokio's runtime or its thread.
    #[cfg(feature = "tokio-compat")]
    TokioCompat(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkers => {
                write!(f, "worker_threads(0): a runtime needs at least one worker")
            }
            BuildError::TooManyWorkers {
                requested,
                available,
            } => write!(
                f,
                "worker_threads({requested}): the topology has only {available} allowed PUs"
            ),
            BuildError::InvalidSynthetic {
                description,
                reason,
            } => {
                write!(f, "invalid synthetic topology {description:?}: {reason}")
            }
            BuildError::InvalidXml { path, reason } => {
                write!(f, "cannot load XML topology {}: {reason}", path.display())
            }
            BuildError::EmptyCpuset { context } => write!(f, "empty cpuset: {context}"),
            BuildError::CpuOutsideTopology { cpu, available } => write!(
                f,
                "cpu {cpu} is not an allowed PU of the topology (allowed OS indices: {available:?})"
            ),
            BuildError::InvalidTunable {
                name,
                value,
                expected,
            } => {
                write!(
                    f,
                    "tunable {name} = {value} is out of range: expected {expected}"
                )
            }
            BuildError::InvalidOption {
                name,
                value,
                expected,
            } => write!(
                f,
                "builder option {name}({value}) is not accepted: expected {expected}"
            ),
            BuildError::InvalidThreadName { name } => {
                write!(f, "thread name {name:?} contains a NUL byte")
            }
            BuildError::Hwloc(msg) => write!(f, "hwloc error: {msg}"),
            BuildError::ThreadSpawn(e) => write!(f, "failed to spawn a worker thread: {e}"),
            BuildError::IoDriver(e) => write!(
                f,
                "cannot open the I/O driver's descriptors (epoll instance and eventfd): {e}"
            ),
            #[cfg(feature = "tokio-compat")]
            BuildError::TokioCompat(e) => write!(f, "failed to start the tokio bridge: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::ThreadSpawn(e) | BuildError::IoDriver(e) => Some(e),
            #[cfg(feature = "tokio-compat")]
            BuildError::TokioCompat(e) => Some(e),
            _ => None,
        }
    }
}
