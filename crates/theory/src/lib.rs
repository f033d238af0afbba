//! The objects that the variance-reduction statements are about, kept small and exact so that
//! property tests (`tests/properties.rs`) can check each statement on thousands of cases, each
//! against a truth computed independently of this code (enumeration, brute force, an identity
//! computed another way, a hand-worked value, or a seeded simulation); the README lists them:
//!
//! - [`sequence`]: score sequences, their mean total variation (MTV), instability score (IS),
//!   total variation (over a whole sequence or over positions a..=b), trailing moving averages
//!   and exponential moving averages;
//! - [`noise`]: signal-plus-noise sequences (i.i.d., AR(1), equicorrelated members) with the
//!   exact variance of their window means;
//! - [`mixture`]: categorical distributions, cross-entropy, ensembles (means of distributions),
//!   the generalised Jensen-Shannon divergence;
//! - [`weights`]: toy models in weight space, convex and not, and the noisy-checkpoint model.
//!
//! Nothing here needs libtorch. Used elsewhere: `sequence::{mtv, instability, exact_match}` and
//! `noise::std_normal` by `analysis`, `mixture::argmax` by `records`, `sequence::total_variation`
//! by the experiments. `integrate` has its own averaging (over safetensors) and ensembling (over
//! option scores); `weights::average` and `mixture::ensemble` are the reference definitions the
//! statements are about.

pub mod mixture;
pub mod noise;
pub mod sequence;
pub mod weights;
