//! Experiments: PTX kernels (`ptx`), the fragment probe (`fragment`) and the inference that
//! turns its observations into a structure (`infer`).

pub mod dense;
pub mod fragment;
pub mod infer;
pub mod numerics;
pub mod ptx;
