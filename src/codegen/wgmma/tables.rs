//! The types of the generated Rust module `crate::generated::wgmma`: the wgmma register tables
//! (D, and A from registers) and the shared-memory forms, with the evaluator host code (and the
//! `--verify` planner) uses to place an element of a tile in shared memory.

use super::super::tables::OperandTable;
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::model::swizzle;
use std::borrow::Cow;

/// One register table of the warpgroup (lane = thread 0..127), shared by the variants whose
/// measured maps give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgTable {
    /// `d.f32.n64` (D of an f32 accumulator, N = 64) or `a.bf16.k16` (A of bf16 from
    /// registers, K = 16): the name of its header, `kernels/generated/wgmma/<key>.cuh`.
    pub key: &'static str,
    /// The lane maps it comes from, relative to the repository root, and their variants.
    pub sources: &'static [&'static str],
    pub variants: &'static [&'static str],
    /// 128: the threads of a warpgroup.
    pub lanes: u32,
    pub table: OperandTable,
}

/// Which coordinate of a tile a term reads: `mn` (the row of A, the column of B) or `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Axis {
    Mn,
    K,
}

impl Axis {
    pub fn name(self) -> &'static str {
        match self {
            Axis::Mn => "mn",
            Axis::K => "k",
        }
    }
}

/// One term of a shared-memory form: `(c + lbo·LBO + sbo·SBO) · ((coord >> lo) mod 2^len)`
/// bits, LBO and SBO in bytes (so `lbo` is 8 where the term steps by LBO itself); `len` 0 is
/// unbounded (the highest run of a coordinate, read on past the measured tile as the fit
/// writes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemTerm {
    pub axis: Axis,
    pub lo: u32,
    pub len: u32,
    pub c: i64,
    pub lbo: i64,
    pub sbo: i64,
}

impl SmemTerm {
    /// The term's bits for coordinates (mn, k) under (lbo, sbo).
    pub fn bits(&self, mn: u32, k: u32, lbo: u32, sbo: u32) -> i64 {
        let x = match self.axis {
            Axis::Mn => mn,
            Axis::K => k,
        } as u64
            >> self.lo;
        let x = if self.len == 0 {
            x
        } else {
            x & ((1u64 << self.len) - 1)
        };
        (self.c + self.lbo * lbo as i64 + self.sbo * sbo as i64) * x as i64
    }
}

/// The measured shared-memory layout of one element size, major-ness and swizzle mode: the
/// offset of element (mn, k) from the descriptor's start is
/// `X(start + Σ terms) − start` (in bytes; bits for sub-byte elements), X the XOR pattern
/// `xor` over absolute shared-memory addresses: address bits [4, 4+s) ^= (bits [7, 7+s) less
/// the descriptor's base offset) mod 2^s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemForm {
    pub elem_bits: u32,
    pub major: Major,
    /// The descriptor's swizzle mode.
    pub swizzle: Swizzle,
    /// The XOR pattern the measurement fits.
    pub xor: Swizzle,
    pub terms: Cow<'static, [SmemTerm]>,
    /// The tile the study measured: mn in 0..measured_mn, k in 0..measured_k.
    pub measured_mn: u32,
    pub measured_k: u32,
    /// Where no passing sweep point changed LBO (SBO), the form holds for this value only.
    pub pinned_lbo: Option<u32>,
    pub pinned_sbo: Option<u32>,
    /// The descriptor base offsets whose sweep points the form (with the base offset taken
    /// from the XOR's row phase) reproduces; 0 is the packed tile's.
    pub base_offsets: Cow<'static, [u32]>,
    /// The study it comes from, relative to the repository root.
    pub source: Cow<'static, str>,
}

impl SmemForm {
    /// `smem.16bit.K.128B`: the study's file stem, and the C++ function's suffix.
    pub fn stem(&self) -> String {
        crate::wgmma::map::smem_stem(self.elem_bits, self.major, self.swizzle)
    }

    /// The bit offset of element (mn, k) from the descriptor's start address `start` (an
    /// absolute shared-memory byte address, or its offset from any 1024-byte boundary), for
    /// a descriptor with this LBO and SBO (bytes) and base offset.
    pub fn bit_offset(
        &self,
        mn: u32,
        k: u32,
        lbo: u32,
        sbo: u32,
        start: u32,
        base_offset: u32,
    ) -> i64 {
        let lin: i64 = self.terms.iter().map(|t| t.bits(mn, k, lbo, sbo)).sum();
        let abs = start as i64 * 8 + lin;
        let byte = abs.div_euclid(8);
        let bit = abs.rem_euclid(8);
        let moved = swizzle(byte as u32, self.xor, base_offset) as i64;
        (moved - start as i64) * 8 + bit
    }

    /// [`bit_offset`](Self::bit_offset) in bytes (elements of 8 bits or more).
    pub fn byte_offset(
        &self,
        mn: u32,
        k: u32,
        lbo: u32,
        sbo: u32,
        start: u32,
        base_offset: u32,
    ) -> i64 {
        self.bit_offset(mn, k, lbo, sbo, start, base_offset)
            .div_euclid(8)
    }

    /// Why a descriptor's base offset is outside what the study measured, if it is (without
    /// a swizzle the XOR, the only reader of the field, is absent).
    pub fn check_base_offset(&self, base_offset: u32) -> Result<(), String> {
        if self.xor == Swizzle::None || self.base_offsets.contains(&base_offset) {
            return Ok(());
        }
        Err(format!(
            "{}: base offset {base_offset} was not measured (measured: {})",
            self.stem(),
            self.base_offsets
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Why (lbo, sbo) is outside what the study measured, if it is.
    pub fn check_fields(&self, lbo: u32, sbo: u32) -> Result<(), String> {
        for (name, pinned, got) in [("LBO", self.pinned_lbo, lbo), ("SBO", self.pinned_sbo, sbo)] {
            if let Some(p) = pinned
                && p != got
            {
                return Err(format!(
                    "{}: what {name} does was not measured (the study holds it at {p} bytes), \
                     and this tile needs {name} = {got}",
                    self.stem()
                ));
            }
        }
        Ok(())
    }
}

/// The measured form of `elem_bits`-bit elements under `major` and `swizzle`.
pub fn smem_form(elem_bits: u32, major: Major, swizzle: Swizzle) -> Option<&'static SmemForm> {
    crate::generated::wgmma::SMEM_FORMS
        .iter()
        .find(|f| f.elem_bits == elem_bits && f.major == major && f.swizzle == swizzle)
}

/// The generated register table `key` (`d.f32.n16`, `a.e4m3.k32`).
pub fn table(key: &str) -> Option<&'static WgTable> {
    crate::generated::wgmma::D_TABLES
        .iter()
        .chain(crate::generated::wgmma::A_TABLES.iter())
        .find(|t| t.key == key)
}
