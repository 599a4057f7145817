//! Experiments.
pub mod ptx;
