//! Putting element values into a probe batch and reading D back: the settable positions of
//! an operand (shared-memory elements or A register slots), one experiment's inputs as a view
//! of its own, and D decoded by slot.

use super::backend::{Batch, Launch, WgBackend};
use super::desc::{Desc, Major};
use super::model::{a_reg_coord, decode_d, element_bit_addr};
use super::{ASource, THREADS, WgVariant};
use anyhow::{Context, Result};

/// Which operand's positions a phase sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Which {
    A,
    B,
}

/// The settable positions of one operand.
pub(super) struct Positions {
    pub(super) which: Which,
    /// Number of positions.
    pub(super) len: usize,
    /// The documented layout's row (A) or column (B) of each position, where it reads one.
    pub(super) predicted: Vec<Option<u32>>,
    /// The documented layout's k of each position.
    pub(super) predicted_k: Vec<Option<u32>>,
}

/// A shared-memory position: (byte from the aligned base, bit).
pub(super) fn smem_pos(bits: u32, p: usize) -> (usize, u32) {
    if bits >= 8 {
        (p * bits as usize / 8, 0)
    } else {
        (p / 8, (p % 8) as u32)
    }
}

pub(super) fn smem_positions(
    v: &WgVariant,
    which: Which,
    major: Major,
    desc: &Desc,
    region: (u32, u32),
    mn: u32,
    k: u32,
) -> Positions {
    let bits = v.elem_bits();
    let len = (region.1 as usize * 8) / bits as usize;
    let mut predicted = vec![None; len];
    let mut predicted_k = vec![None; len];
    for i in 0..mn {
        for j in 0..k {
            let addr = element_bit_addr(major, desc, desc.swizzle, bits, i, j);
            let rel = addr.checked_sub(region.0 as u64 * 8);
            if let Some(p) = rel.map(|r| (r / bits as u64) as usize).filter(|&p| p < len) {
                predicted[p] = Some(i);
                predicted_k[p] = Some(j);
            }
        }
    }
    Positions {
        which,
        len,
        predicted,
        predicted_k,
    }
}

pub(super) fn reg_positions(v: &WgVariant) -> Positions {
    let f = v.a_frag();
    let (predicted, predicted_k) = (0..f.slots())
        .map(|i| {
            let (r, k) = a_reg_coord(&f, i);
            (Some(r), Some(k))
        })
        .unzip();
    Positions {
        which: Which::A,
        len: f.slots(),
        predicted,
        predicted_k,
    }
}

/// One experiment's inputs: its A and B regions and its A register words.
pub(super) struct Exp<'b> {
    pub(super) a: &'b mut [u8],
    pub(super) b: &'b mut [u8],
    pub(super) a_regs: &'b mut [u32],
}

/// Writes element values into a batch.
pub(super) struct Placer<'a> {
    pub(super) v: &'a WgVariant,
    pub(super) l: &'a Launch,
    /// One experiment's A and B inputs with every position set to one, built on first use:
    /// copying them is what makes the large b1 batches cheap to fill.
    pub(super) ones: [std::sync::OnceLock<Vec<u8>>; 2],
}

impl<'a> Placer<'a> {
    pub(super) fn new(v: &'a WgVariant, l: &'a Launch) -> Self {
        Placer {
            v,
            l,
            ones: Default::default(),
        }
    }

    pub(super) fn set(&self, batch: &mut Batch, which: Which, exp: usize, p: usize, code: u64) {
        let (a_per, b_per, r_per) = self.per_experiment();
        let mut x = Exp {
            a: batch
                .a
                .get_mut(exp * a_per..(exp + 1) * a_per)
                .unwrap_or(&mut []),
            b: &mut batch.b[exp * b_per..(exp + 1) * b_per],
            a_regs: batch
                .a_regs
                .get_mut(exp * r_per..(exp + 1) * r_per)
                .unwrap_or(&mut []),
        };
        self.set_in(&mut x, which, p, code);
    }

    /// Bytes of A and B and words of A registers one experiment holds.
    pub(super) fn per_experiment(&self) -> (usize, usize, usize) {
        let r = if self.v.a_src == ASource::Rs {
            THREADS as usize * self.v.a_frag().regs as usize
        } else {
            0
        };
        (self.l.a_bytes as usize, self.l.b_bytes as usize, r)
    }

    /// Every experiment's inputs as its own mutable view, so that experiments fill in
    /// parallel.
    pub(super) fn experiments<'b>(&self, batch: &'b mut Batch) -> Vec<Exp<'b>> {
        let (a_per, b_per, r_per) = self.per_experiment();
        let (mut a, mut b, mut r) = (
            batch.a.as_mut_slice(),
            batch.b.as_mut_slice(),
            batch.a_regs.as_mut_slice(),
        );
        (0..batch.experiments)
            .map(|_| {
                let (na, nr) = (a_per.min(a.len()), r_per.min(r.len()));
                let (x, rest) = std::mem::take(&mut a).split_at_mut(na);
                a = rest;
                let (y, rest) = std::mem::take(&mut b).split_at_mut(b_per);
                b = rest;
                let (z, rest) = std::mem::take(&mut r).split_at_mut(nr);
                r = rest;
                Exp {
                    a: x,
                    b: y,
                    a_regs: z,
                }
            })
            .collect()
    }

    /// Set position `p` of `which` to `code` in one experiment's inputs.
    pub(super) fn set_in(&self, x: &mut Exp, which: Which, p: usize, code: u64) {
        let bits = self.v.elem_bits();
        match (which, self.v.a_src) {
            (Which::A, ASource::Rs) => {
                let f = self.v.a_frag();
                let (t, reg, e) = f.slot(p);
                let base = t as usize * f.regs as usize;
                f.insert(&mut x.a_regs[base..base + f.regs as usize], reg, e, code);
            }
            _ => {
                let region = match which {
                    Which::A => &mut *x.a,
                    Which::B => &mut *x.b,
                };
                let (byte, bit) = smem_pos(bits, p);
                if bits >= 8 {
                    for i in 0..(bits / 8) as usize {
                        region[byte + i] = (code >> (8 * i)) as u8;
                    }
                } else {
                    let mask = ((1u8 << bits) - 1) << bit;
                    region[byte] = (region[byte] & !mask) | (((code as u8) << bit) & mask);
                }
            }
        }
    }

    /// Every position of `which` (`len` of them) set to one.
    pub(super) fn fill_ones(&self, batch: &mut Batch, which: Which, exp: usize, len: usize) {
        let template = self.ones[which as usize].get_or_init(|| {
            let mut one = Batch::zeroed(self.v, self.l, 1);
            let code = self.one(which);
            for p in 0..len {
                self.set(&mut one, which, 0, p, code);
            }
            match (which, self.v.a_src) {
                (Which::A, ASource::Rs) => {
                    one.a_regs.iter().flat_map(|w| w.to_le_bytes()).collect()
                }
                (Which::A, ASource::Ss) => one.a,
                (Which::B, _) => one.b,
            }
        });
        match (which, self.v.a_src) {
            (Which::A, ASource::Rs) => {
                let per = template.len() / 4;
                let words = &mut batch.a_regs[exp * per..(exp + 1) * per];
                for (w, b) in words.iter_mut().zip(template.chunks_exact(4)) {
                    *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            (Which::A, ASource::Ss) => {
                let per = template.len();
                batch.a[exp * per..(exp + 1) * per].copy_from_slice(template);
            }
            (Which::B, _) => {
                let per = template.len();
                batch.b[exp * per..(exp + 1) * per].copy_from_slice(template);
            }
        }
    }

    pub(super) fn one(&self, which: Which) -> u64 {
        match which {
            Which::A => self.v.a.one(),
            Which::B => self.v.b.one(),
        }
    }

    pub(super) fn set_c(&self, batch: &mut Batch, exp: usize, slot: usize, code: u64) {
        let f = self.v.d_frag();
        let (t, reg, e) = f.slot(slot);
        let base = (exp * THREADS as usize + t as usize) * f.regs as usize;
        f.insert(&mut batch.c[base..base + f.regs as usize], reg, e, code);
    }
}

/// D of a batch, decoded on demand.
pub(super) struct DValues<'a> {
    pub(super) v: &'a WgVariant,
    pub(super) f: super::RegFrag,
    pub(super) words: Vec<u32>,
}

impl DValues<'_> {
    /// A slot's bits. Slots run `(thread * regs + reg) * elems_per_reg + elem` and D words
    /// `[experiment][thread][reg]`, so slot / elems_per_reg is the word within an experiment.
    pub(super) fn bits(&self, exp: usize, slot: usize) -> u64 {
        let f = &self.f;
        let per = f.elems_per_reg as usize;
        let w = self.words[exp * f.slots() / per + slot / per] as u64;
        if f.elem_bits == 32 {
            return w;
        }
        (w >> ((slot % per) as u32 * f.elem_bits)) & ((1u64 << f.elem_bits) - 1)
    }
    pub(super) fn value(&self, exp: usize, slot: usize) -> f64 {
        decode_d(self.v.d, self.bits(exp, slot))
    }
}

pub(super) fn run<'a>(
    backend: &dyn WgBackend,
    v: &'a WgVariant,
    l: &Launch,
    batch: &Batch,
    what: &str,
) -> Result<DValues<'a>> {
    let words = backend
        .run(v, l, batch)
        .with_context(|| format!("{what} launch"))?;
    Ok(DValues {
        v,
        f: v.d_frag(),
        words,
    })
}
