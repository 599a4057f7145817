//! Experiments: PTX kernels (`ptx`), latency/throughput (`bench`), the fragment probe (`fragment`) and the inference that
//! turns its observations into a structure (`infer`), dense value experiments (`dense`), numeric
//! behaviour (`numerics`), the container sweep (`container`), the block-scale probe (`scale`) and
//! the `mma.sp` probe of lane and metadata maps (`sparse`).

pub mod bench;
pub mod container;
pub mod dense;
pub mod fragment;
pub mod infer;
pub mod numerics;
pub mod ptx;
pub mod scale;
pub mod sparse;
