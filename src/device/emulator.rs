//! A CPU model of `mma.sync`, driven by a layout, so that every probe, inference and test runs
//! without a GPU.
//!
//! Arithmetic model (stated, because emulator results are never hardware findings):
//! - operands are decoded exactly (the layout says which slot is which element; FP4 sits in bits
//!   5..2 of its byte under kind::f8f6f4 / kind::mxf8f6f4, FP6 in bits 5..0);
//! - every product, and the whole sum C + Σ_k a·b·scale_a·scale_b, is formed exactly in f64
//!   (exact for the probes' small powers of two) and rounded once to the D type, to nearest even;
//!   integer D wraps, or saturates with `.satfinite`; b1 counts AND / XOR bits;
//! - block scales follow the PTX ISA's description: the scale of A row r comes from lane
//!   4·(r mod 8) + 2·thread-id-a + r div 8, that of B column c from lane 4·c + thread-id-b; the
//!   byte is byte-id (1X) or byte-id + k-block (2X, 4X). This is the documented model, not a
//!   measurement: the scale probe measures it on hardware that has the instruction;
//! - `mma.sp` reads each lane's metadata word through `layout::meta::emulated_meta` (the
//!   documented model, and for 8- and 4-bit A the map measured on the H200), places the compressed A's elements in the dense A by it and computes the
//!   dense product as above; a metadata nibble the PTX ISA calls invalid is an error. Block
//!   scales of the sparse sm_120a forms cover K/vec consecutive k of the dense product.

use super::{Backend, BackendKind, Batch, DWords, DeviceInfo};
use crate::gemm;
use crate::isa::sparse::SparseGeom;
use crate::isa::{Operand, ScaleSelectors, Variant};
use crate::layout::documented::documented;
use crate::layout::meta::{MetaField, densify, emulated_meta, read_nibbles};
use crate::layout::{Layout, SlotSpace};
use anyhow::{Result, bail};
use std::collections::HashMap;

pub struct Emulator {
    info: DeviceInfo,
    /// Layouts that replace the documented one for a variant id (tests feed permuted layouts).
    overrides: HashMap<String, Layout>,
    /// Metadata maps that replace the documented ones, by variant id and sparsity selector.
    meta_overrides: HashMap<(String, u32), Vec<MetaField>>,
}

impl Default for Emulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Emulator {
    pub fn new() -> Self {
        Emulator {
            info: DeviceInfo {
                backend: BackendKind::Emulator,
                name: "fp4probe emulator (PTX ISA documented layouts)".into(),
                compute_capability: None,
                driver: None,
            },
            overrides: HashMap::new(),
            meta_overrides: HashMap::new(),
        }
    }

    /// Emulate sparse `v` under `selector` with the metadata map `fields`.
    pub fn with_meta(mut self, v: &Variant, selector: u32, fields: Vec<MetaField>) -> Self {
        self.info.name = "fp4probe emulator (custom layout)".into();
        self.meta_overrides.insert((v.id(), selector), fields);
        self
    }

    fn meta(&self, v: &Variant, selector: u32) -> Vec<MetaField> {
        self.meta_overrides
            .get(&(v.id(), selector))
            .cloned()
            .unwrap_or_else(|| emulated_meta(v, selector))
    }

    /// Emulate `v` with `layout` instead of the documented one.
    pub fn with_layout(mut self, v: &Variant, layout: Layout) -> Self {
        self.info.name = "fp4probe emulator (custom layout)".into();
        self.overrides.insert(v.id(), layout);
        self
    }

    fn layout(&self, v: &Variant) -> Layout {
        self.overrides
            .get(&v.id())
            .cloned()
            .unwrap_or_else(|| documented(v))
    }
}

/// Decode an operand of one experiment into a dense row-major matrix.
fn gather(v: &Variant, op: Operand, map: &[crate::layout::Coord], words: &[u32]) -> Vec<f64> {
    let f = v.fragment(op);
    let space = SlotSpace::of(&f);
    let wpl = f.words_per_lane() as usize;
    let mut m = vec![0.0; (f.rows * f.cols) as usize];
    for (i, c) in map.iter().enumerate() {
        let s = space.slot(i);
        let lane_words = &words[s.lane as usize * wpl..(s.lane as usize + 1) * wpl];
        let bits = f.extract(lane_words, s.reg, s.elem);
        m[(c.row * f.cols + c.col) as usize] = f.elem.decode(bits);
    }
    m
}

fn scale_value(v: &Variant, words: &[u32], lane: u32, byte: u32) -> f64 {
    let st = v.scale.expect("scaled").stype;
    st.decode(((words[lane as usize] >> (8 * byte)) & 0xff) as u64)
}

/// Scale matrices (m×blocks for A, blocks×n for B) as the documented lane model reads them.
fn scales(
    v: &Variant,
    sel: ScaleSelectors,
    vec: u32,
    sa: &[u32],
    sb: &[u32],
) -> (Vec<f64>, Vec<f64>) {
    let byte = |base: u32, kb: u32| if vec == 1 { base } else { base + kb };
    let (m, n) = (v.shape.m, v.shape.n);
    let mut a = Vec::with_capacity((m * vec) as usize);
    for i in 0..m {
        for kb in 0..vec {
            a.push(scale_value(
                v,
                sa,
                4 * (i % 8) + 2 * sel.thread_a + i / 8,
                byte(sel.byte_a, kb),
            ));
        }
    }
    let mut b = vec![0.0; (vec * n) as usize];
    for kb in 0..vec {
        for j in 0..n {
            b[(kb * n + j) as usize] =
                scale_value(v, sb, 4 * j + sel.thread_b, byte(sel.byte_b, kb));
        }
    }
    (a, b)
}

impl Backend for Emulator {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn check_supported(&self, v: &Variant) -> Result<()> {
        // The documented layouts it runs cover the lane-mapped variants only.
        match v.not_lane_mapped() {
            Some(why) => bail!("{} is not probed: {why}", v.id()),
            None => Ok(()),
        }
    }

    fn run(&self, v: &Variant, sel: ScaleSelectors, batch: &Batch) -> Result<DWords> {
        let layout = self.layout(v);
        if let Err(e) = layout.check_bijective(v) {
            bail!("emulator layout for {} is not a bijection: {e}", v.id());
        }
        let n = v.shape.n as usize;
        let fd = v.fragment(Operand::D);
        let dspace = SlotSpace::of(&fd);
        let words = |op: Operand| v.fragment(op).words_per_lane() as usize * 32;
        let (wa, wb, wc, wd) = (
            words(Operand::A),
            words(Operand::B),
            words(Operand::C),
            words(Operand::D),
        );
        batch.check_sparsity_selector(v)?;
        if let Some(g) = SparseGeom::of(v) {
            let named = g.documented_selectors(v.shape.m);
            let overridden = self
                .meta_overrides
                .contains_key(&(v.id(), batch.sparsity_selector));
            if batch.sparsity_selector >= named && !overridden {
                bail!(
                    "{}: ptxas takes sparsity selector {}, but the PTX ISA names only 0..{named}; \
                     the emulator has no model for it",
                    v.id(),
                    batch.sparsity_selector
                );
            }
        }
        let sparse = SparseGeom::of(v).map(|g| (g, self.meta(v, batch.sparsity_selector)));
        // The dense product a sparse variant computes once its A is placed.
        let dense = Variant {
            sparse: None,
            ..v.clone()
        };
        let mut out = vec![0u32; batch.experiments * wd];
        for e in 0..batch.experiments {
            let mut a = gather(v, Operand::A, &layout.a, &batch.a[e * wa..(e + 1) * wa]);
            if let Some((g, fields)) = &sparse {
                let nibbles = read_nibbles(v, fields, &batch.meta[e * 32..(e + 1) * 32]);
                let valid = g.valid_nibbles();
                if let Some(i) = nibbles.iter().position(|x| !valid.contains(x)) {
                    bail!(
                        "{} experiment {e}: metadata of row {} chunk {} is {:#06b}, which the \
                         PTX ISA leaves undefined",
                        v.id(),
                        i as u32 / g.chunks,
                        i as u32 % g.chunks,
                        nibbles[i]
                    );
                }
                a = densify(v, &a, &nibbles);
            }
            let b = gather(v, Operand::B, &layout.b, &batch.b[e * wb..(e + 1) * wb]);
            let c = gather(v, Operand::C, &layout.c, &batch.c[e * wc..(e + 1) * wc]);
            let (scale_a, scale_b) = match v.scale {
                Some(sc) => scales(
                    v,
                    sel,
                    sc.vec,
                    &batch.scale_a[e * 32..(e + 1) * 32],
                    &batch.scale_b[e * 32..(e + 1) * 32],
                ),
                None => (vec![], vec![]),
            };
            let d = gemm::mma(
                &dense,
                &gemm::Operands {
                    a: &a,
                    b: &b,
                    c: &c,
                    scale_a: &scale_a,
                    scale_b: &scale_b,
                },
            );
            let dw = &mut out[e * wd..(e + 1) * wd];
            let wpl = fd.words_per_lane() as usize;
            for (idx, coord) in layout.d.iter().enumerate() {
                let s = dspace.slot(idx);
                let val = gemm::round_to(
                    fd.elem,
                    d[(coord.row as usize) * n + coord.col as usize],
                    v.satfinite,
                );
                fd.insert(
                    &mut dw[s.lane as usize * wpl..(s.lane as usize + 1) * wpl],
                    s.reg,
                    s.elem,
                    val,
                );
            }
        }
        Ok(out)
    }
}
