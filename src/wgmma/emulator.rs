//! The wgmma emulator: the documented layouts (`model`) run on the CPU, so every wgmma probe,
//! inference and test runs without a GPU. Emulator results are never hardware findings.
//!
//! Arithmetic: operands are decoded exactly, D = C·[scale-d] + A·B is formed exactly in f64 and
//! rounded once to the D type (to nearest even; s32 wraps, or saturates with `.satfinite`).
//! Tests replace the register layouts, the XOR pattern a swizzle mode applies, or the float
//! accumulation (`arith::Accumulation`), to check that the probes recover what they were not
//! told.

use super::arith::Accumulation;
use super::backend::{Batch, Launch, WgBackend};
use super::desc::Swizzle;
use super::model::{a_reg_coord, d_coord, element_bit_addr, gemm, round_d};
use super::{ASource, M, THREADS, WgVariant};
use crate::device::{BackendKind, DeviceInfo};
use anyhow::{Result, bail};
use rayon::prelude::*;

/// Replacement layouts: (row, col) per D slot, (row, k) per A register slot.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub d: Option<Vec<(u32, u32)>>,
    pub a_regs: Option<Vec<(u32, u32)>>,
    /// The XOR pattern each descriptor swizzle mode applies (documented: its own).
    pub pattern: Option<fn(Swizzle) -> Swizzle>,
}

pub struct WgEmulator {
    info: DeviceInfo,
    overrides: Overrides,
    /// How float variants accumulate (None: exact, one rounding to nearest).
    accumulation: Option<Accumulation>,
}

impl Default for WgEmulator {
    fn default() -> Self {
        Self::new()
    }
}

impl WgEmulator {
    pub fn new() -> Self {
        WgEmulator {
            info: DeviceInfo {
                backend: BackendKind::Emulator,
                name: "fp4probe emulator (PTX ISA documented wgmma layouts)".into(),
                compute_capability: None,
                driver: None,
            },
            overrides: Overrides::default(),
            accumulation: None,
        }
    }

    /// Emulate float variants with `acc` instead of the exact sum (tests of the numerics).
    pub fn with_accumulation(acc: Accumulation) -> Self {
        let mut e = Self::new();
        e.info.name = "fp4probe emulator (custom wgmma accumulation)".into();
        e.accumulation = Some(acc);
        e
    }

    /// Emulate with replaced layouts (tests of the inference).
    pub fn with(overrides: Overrides) -> Self {
        let mut e = Self::new();
        e.info.name = "fp4probe emulator (custom wgmma layout)".into();
        e.overrides = overrides;
        e
    }
}

/// Read the `bits`-bit element at absolute bit address `addr` of the shared-memory image.
fn read(smem: &[u8], addr: u64, bits: u32) -> u64 {
    let byte = (addr / 8) as usize;
    if bits >= 8 {
        let n = (bits / 8) as usize;
        let mut v = 0u64;
        for i in 0..n {
            v |= (*smem.get(byte + i).unwrap_or(&0) as u64) << (8 * i);
        }
        v
    } else {
        ((*smem.get(byte).unwrap_or(&0) as u64) >> (addr % 8)) & ((1 << bits) - 1)
    }
}

impl WgBackend for WgEmulator {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn check_supported(&self, v: &WgVariant) -> Result<()> {
        if v.sparse {
            bail!("{}: the sparse forms are catalogued, not probed", v.id());
        }
        Ok(())
    }

    fn run(&self, v: &WgVariant, l: &Launch, batch: &Batch) -> Result<Vec<u32>> {
        self.check_supported(v)?;
        let (n, k) = (v.n as usize, v.k as usize);
        let m = M as usize;
        let bits = v.elem_bits();
        let fd = v.d_frag();
        let fa = v.a_frag();
        let d_map: Vec<(u32, u32)> = match &self.overrides.d {
            Some(x) => x.clone(),
            None => (0..fd.slots()).map(|i| d_coord(&fd, i)).collect(),
        };
        let a_map: Vec<(u32, u32)> = match &self.overrides.a_regs {
            Some(x) => x.clone(),
            None => (0..fa.slots()).map(|i| a_reg_coord(&fa, i)).collect(),
        };
        let pattern = |s: Swizzle| self.overrides.pattern.map_or(s, |p| p(s));
        let t = THREADS as usize;
        let (dw, aw) = (fd.regs as usize, fa.regs as usize);
        let smem_len = l.smem_bytes() as usize;
        let mut out = vec![0u32; batch.experiments * t * dw];
        // Experiments are independent: each one's D is computed on a thread of its own.
        out.par_chunks_mut(t * dw)
            .enumerate()
            .for_each(|(e, dwords)| {
                let mut smem = vec![0u8; smem_len];
                let ab = l.a_bytes as usize;
                smem[..ab].copy_from_slice(&batch.a[e * ab..(e + 1) * ab]);
                let (bo, bb) = (l.b_off as usize, l.b_bytes as usize);
                smem[bo..bo + bb].copy_from_slice(&batch.b[e * bb..(e + 1) * bb]);
                let mut a = vec![0.0; m * k];
                match v.a_src {
                    ASource::Ss => {
                        for r in 0..m {
                            for kk in 0..k {
                                let (mn, kx) = (r as u32, kk as u32);
                                let addr = element_bit_addr(
                                    l.a_major,
                                    &l.a_desc,
                                    pattern(l.a_desc.swizzle),
                                    bits,
                                    mn,
                                    kx,
                                );
                                a[r * k + kk] = v.a.decode(read(&smem, addr, bits));
                            }
                        }
                    }
                    ASource::Rs => {
                        let regs = &batch.a_regs[e * t * aw..(e + 1) * t * aw];
                        for (i, &(r, kk)) in a_map.iter().enumerate() {
                            let (th, reg, el) = fa.slot(i);
                            let words = &regs[th as usize * aw..(th as usize + 1) * aw];
                            a[r as usize * k + kk as usize] =
                                v.a.decode(fa.extract(words, reg, el));
                        }
                    }
                }
                let mut b = vec![0.0; k * n];
                for kk in 0..k {
                    for j in 0..n {
                        let addr = element_bit_addr(
                            l.b_major,
                            &l.b_desc,
                            pattern(l.b_desc.swizzle),
                            bits,
                            j as u32,
                            kk as u32,
                        );
                        b[kk * n + j] = v.b.decode(read(&smem, addr, bits));
                    }
                }
                let mut c = vec![0.0; m * n];
                if l.scale_d {
                    let cw = &batch.c[e * t * dw..(e + 1) * t * dw];
                    for (i, &(r, col)) in d_map.iter().enumerate() {
                        let (th, reg, el) = fd.slot(i);
                        let words = &cw[th as usize * dw..(th as usize + 1) * dw];
                        c[r as usize * n + col as usize] =
                            super::model::decode_d(v.d, fd.extract(words, reg, el));
                    }
                }
                let d: Vec<u64> = match self.accumulation.filter(|_| v.d.is_float()) {
                    Some(acc) => acc.gemm_bits(v, &a, &b, &c),
                    None => gemm(v, &a, &b, &c)
                        .into_iter()
                        .map(|x| round_d(v, x))
                        .collect(),
                };
                for (i, &(r, col)) in d_map.iter().enumerate() {
                    let (th, reg, el) = fd.slot(i);
                    let bits = d[r as usize * n + col as usize];
                    fd.insert(
                        &mut dwords[th as usize * dw..(th as usize + 1) * dw],
                        reg,
                        el,
                        bits,
                    );
                }
            });
        Ok(out)
    }
}
