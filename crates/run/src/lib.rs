//! `run`: the run folder as one typed contract, shared by every crate that reads or writes one
//! (lm, integrate, analysis, experiments); it needs no libtorch.
//!
//! - [`layout`]: where each output of a run lives (checkpoints, eval folders of every method,
//!   averaged checkpoints, ensembles, analysis) and how its variants are found again;
//! - [`method`]: the methods (single, smoothing, average, ensemble, ensemble_vote) and their k;
//! - [`config`]: the run configuration (TOML), its hash, schedules and parameter count, and the
//!   eval configuration;
//! - [`sidecar`]: the checkpoint sidecar `step_NNNNNN.json`;
//! - [`provenance`]: what an eval folder records (`lm eval`), and an input file with its hash.
//!
//! Folder and method names are written here and nowhere else (a test of the workspace checks).

pub mod config;
pub mod layout;
pub mod method;
pub mod provenance;
pub mod sidecar;

pub use config::{Config, EvalConfig};
pub use layout::RunDir;
pub use method::{Method, Variant};
pub use sidecar::Sidecar;
