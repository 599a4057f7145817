//! Locating and running the offline CUDA tools (ptxas, cuobjdump, nvdisasm) from PATH, from
//! `FP4PROBE_CUDA_BIN`, or from the pinned pip packages under `.tools/`.
