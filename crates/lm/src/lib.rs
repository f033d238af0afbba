//! `lm`: a small LLaMA-style decoder pretrained with libtorch (`tch`), leaving a dense trail of
//! checkpoints for the fluctuation study.
//!
//! - [`config`]: the run config (TOML), its hash and learning-rate schedules (owned by the
//!   `run` crate, the run folder's contract, and re-exported here).
//! - [`tokenize`]: byte-level BPE training and cached corpus encoding.
//! - [`model`]: the decoder.
//! - [`optim`]: AdamW with savable moments.
//! - [`checkpoint`]: safetensors + JSON sidecar, atomic writes, integrity checks.
//! - [`train`]: the training loop with exact resumption.
//! - [`score`]: log-likelihood scoring of (context, continuation) requests.
//! - [`eval`]: downstream evaluation of every checkpoint, per-example records.
//! - [`export`]: a checkpoint as a Hugging Face (Llama) folder; logits for parity checks.
//! - [`generate`]: batched greedy decoding with a key/value cache and stop strings.
//! - [`heap`]: malloc settings that keep tensors' freed memory for reuse (every command sets them).

pub mod checkpoint;
pub use run::config;
pub mod eval;
pub mod export;
pub mod generate;
pub mod heap;
pub mod model;
pub mod optim;
pub mod score;
pub mod tokenize;
pub mod train;

pub use tch;
