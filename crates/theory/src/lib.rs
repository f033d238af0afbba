//! The objects that the variance-reduction statements are about, kept small and exact so that
//! property tests (`tests/properties.rs`) can check each statement on thousands of cases:
//!
//! - [`sequence`]: score sequences, their mean total variation (MTV), instability score (IS),
//!   total variation, trailing moving averages and exponential moving averages;
//! - [`noise`]: signal-plus-noise sequences (i.i.d., AR(1), equicorrelated members) with the
//!   exact variance of their window means;
//! - [`mixture`]: categorical distributions, cross-entropy, ensembles (means of distributions),
//!   the generalised Jensen-Shannon divergence;
//! - [`weights`]: toy models in weight space, convex and not, and the noisy-checkpoint model.
//!
//! Nothing here needs libtorch; the analysis and integration crates use the same definitions.

pub mod mixture;
pub mod noise;
pub mod sequence;
pub mod weights;
