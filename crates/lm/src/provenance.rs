//! Where an output came from (the shared helpers live in `corpus::provenance`).
pub use corpus::provenance::{git_commit, sha256_file};
