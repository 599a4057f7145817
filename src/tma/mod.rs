//! Probes of the bulk tensor copies (`cp.async.bulk.tensor`, TMA, sm_90): where a 2D tiled
//! tensor map's box lands in shared memory under each swizzle mode and element size (load,
//! global → shared), and where a shared box lands in global memory (store, shared → global).
//!
//! One case is one tensor map (element size, swizzle, box shape) and one direction. The global
//! tensor is a little larger than the box, and the box starts off its origin, so a copy that
//! ignores the box's coordinates or the global stride shows. Tag experiments fill the source
//! with element ids (split into byte planes where an element is too narrow to hold one), from
//! which [`probe`] reads which box element lands at which shared byte; random experiments,
//! predicted through that map, validate it byte for byte. [`feed`] then says which wgmma
//! descriptor swizzle reads a TMA-filled tile in the order the wgmma probes measured.

pub mod backend;
pub mod feed;
pub mod kernel;
pub mod map;
pub mod model;
pub mod probe;
pub mod sass;
pub mod stsm;

pub use crate::wgmma::desc::Swizzle;
use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes past the box that the probes also read back, to show that a copy writes nothing
/// beyond it.
pub const GUARD_BYTES: u32 = 256;
/// Rows of every box in [`catalog`]: two repeats of the 8-row swizzle pattern.
pub const BOX_ROWS: u32 = 16;
/// The most shared memory a case's box may take (the probe kernel's static region).
pub const MAX_BOX_BYTES: u32 = 32 * 1024;
/// The rows and 16-byte chunks by which the global tensor exceeds the box, and where the box
/// starts in it: (row, 16-byte chunk).
pub const EXTRA_ROWS: u32 = 8;
pub const EXTRA_CHUNKS: u32 = 2;
pub const ORIGIN: (u32, u32) = (5, 1);

/// Which way the copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes`.
    Load,
    /// `cp.async.bulk.tensor.2d.global.shared::cta.bulk_group`.
    Store,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Load => "load",
            Dir::Store => "store",
        }
    }
}

/// One tensor map and direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Case {
    pub dir: Dir,
    /// Element size in bytes: 1, 2 or 4 (tensor data types UINT8, UINT16, UINT32).
    pub elem_bytes: u32,
    pub swizzle: Swizzle,
    pub box_rows: u32,
    /// The box's inner (contiguous) extent, in elements.
    pub box_cols: u32,
    /// The box's shared-memory address from a 1024-byte-aligned base.
    pub smem_offset: u32,
}

impl Case {
    /// `load.u16.128B.16x64` (rows × cols of elements), `.at256` for a shared offset.
    pub fn id(&self) -> String {
        let at = if self.smem_offset == 0 {
            String::new()
        } else {
            format!(".at{}", self.smem_offset)
        };
        format!(
            "{}.u{}.{}.{}x{}{at}",
            self.dir.name(),
            8 * self.elem_bytes,
            self.swizzle.name(),
            self.box_rows,
            self.box_cols
        )
    }

    /// Bytes of one box row.
    pub fn inner_bytes(&self) -> u32 {
        self.box_cols * self.elem_bytes
    }

    pub fn box_bytes(&self) -> u32 {
        self.box_rows * self.inner_bytes()
    }

    /// Elements of the box.
    pub fn box_elems(&self) -> usize {
        (self.box_rows * self.box_cols) as usize
    }

    /// Shared bytes the probe reads back from the box's address: the box, with its rows a
    /// whole swizzle span apart where they are narrower (so a copy that pads a row to the span
    /// stays inside), and a guard.
    pub fn region_bytes(&self) -> u32 {
        self.box_rows * self.inner_bytes().max(span_bytes(self.swizzle)) + GUARD_BYTES
    }

    /// Global tensor (rows, cols in elements).
    pub fn global_dims(&self) -> (u32, u32) {
        (
            self.box_rows + EXTRA_ROWS,
            self.box_cols + EXTRA_CHUNKS * 16 / self.elem_bytes,
        )
    }

    pub fn global_bytes(&self) -> usize {
        let (r, c) = self.global_dims();
        (r * c * self.elem_bytes) as usize
    }

    /// The box's first element in the global tensor (row, col).
    pub fn origin(&self) -> (u32, u32) {
        (ORIGIN.0, ORIGIN.1 * 16 / self.elem_bytes)
    }

    /// Byte offset of global element (row, col).
    pub fn global_byte(&self, row: u32, col: u32) -> usize {
        ((row * self.global_dims().1 + col) * self.elem_bytes) as usize
    }

    /// Global byte offset of box element (r, c).
    pub fn box_global_byte(&self, r: u32, c: u32) -> usize {
        let (r0, c0) = self.origin();
        self.global_byte(r0 + r, c0 + c)
    }

    /// The tensor data type's name in the driver API.
    pub fn data_type(&self) -> &'static str {
        match self.elem_bytes {
            1 => "UINT8",
            2 => "UINT16",
            _ => "UINT32",
        }
    }

    /// Refuse a case the tensor map or the probe cannot hold, naming the problem.
    pub fn check(&self) -> Result<()> {
        let id = self.id();
        if ![1, 2, 4].contains(&self.elem_bytes) {
            bail!(
                "{id}: element size {} bytes is not one the probe runs (1, 2 or 4)",
                self.elem_bytes
            );
        }
        for (what, n) in [("rows", self.box_rows), ("cols", self.box_cols)] {
            if n == 0 || n > 256 {
                bail!("{id}: box {what} = {n}, a tensor map's box extent is 1..=256");
            }
        }
        let inner = self.inner_bytes();
        if !inner.is_multiple_of(16) {
            bail!(
                "{id}: the box's inner extent is {inner} bytes; a tensor map needs a multiple of \
                 16 bytes"
            );
        }
        if self.swizzle != Swizzle::None && inner > self.swizzle.width() {
            bail!(
                "{id}: the box's inner extent is {inner} bytes, wider than the {} swizzle span \
                 ({} bytes); under a swizzle mode it must fit the span",
                self.swizzle,
                self.swizzle.width()
            );
        }
        if !self.smem_offset.is_multiple_of(128) || self.smem_offset >= 1024 {
            bail!(
                "{id}: shared offset {} is not a multiple of 128 below 1024 (a bulk tensor \
                 copy's shared address is 128-byte aligned)",
                self.smem_offset
            );
        }
        if self.box_bytes() > MAX_BOX_BYTES {
            bail!(
                "{id}: the box takes {} bytes of shared memory, more than the probe's {} \
                 bytes",
                self.box_bytes(),
                MAX_BOX_BYTES
            );
        }
        Ok(())
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

impl std::str::FromStr for Case {
    type Err = anyhow::Error;
    /// The inverse of [`Case::id`]; the case is checked.
    fn from_str(s: &str) -> Result<Self> {
        let usage = || {
            anyhow::anyhow!(
                "'{s}' is not a TMA case id (e.g. load.u16.128B.16x64 or store.u8.none.16x16.at256; \
                 see `fp4probe tma probe --list`)"
            )
        };
        let parts: Vec<&str> = s.split('.').collect();
        if !(4..=5).contains(&parts.len()) {
            return Err(usage());
        }
        let dir = match parts[0] {
            "load" => Dir::Load,
            "store" => Dir::Store,
            _ => return Err(usage()),
        };
        let elem_bytes = match parts[1] {
            "u8" => 1,
            "u16" => 2,
            "u32" => 4,
            other => bail!("'{s}': element type '{other}' is not u8, u16 or u32"),
        };
        let swizzle: Swizzle = parts[2].parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let (r, c) = parts[3].split_once('x').ok_or_else(usage)?;
        let (box_rows, box_cols) = (
            r.parse().map_err(|_| usage())?,
            c.parse().map_err(|_| usage())?,
        );
        let smem_offset = match parts.get(4) {
            Some(at) => at
                .strip_prefix("at")
                .and_then(|n| n.parse().ok())
                .ok_or_else(usage)?,
            None => 0,
        };
        let case = Case {
            dir,
            elem_bytes,
            swizzle,
            box_rows,
            box_cols,
            smem_offset,
        };
        case.check()?;
        Ok(case)
    }
}

/// The box's inner extent that fills the swizzle span (16 bytes, one core-matrix row, for
/// none), in bytes.
pub fn span_bytes(s: Swizzle) -> u32 {
    s.width()
}

/// The cases `fp4probe tma probe --all` runs: for each element size, loads with the inner
/// extent at the swizzle span under every mode, a 128-byte row without swizzle and a half-span
/// row under 128B, and stores at the span under every mode; for 16-bit elements also rows
/// narrower than the span under each swizzle mode (loads, and a store under 128B), a box of
/// 64 rows, and loads to a shared address off the 1024-byte pattern repeat.
pub fn catalog() -> Vec<Case> {
    let mk = |dir, elem_bytes, swizzle, inner: u32, box_rows, smem_offset| Case {
        dir,
        elem_bytes,
        swizzle,
        box_rows,
        box_cols: inner / elem_bytes,
        smem_offset,
    };
    let mut out = Vec::new();
    for e in [1, 2, 4] {
        for s in Swizzle::ALL {
            out.push(mk(Dir::Load, e, s, span_bytes(s), BOX_ROWS, 0));
        }
        out.push(mk(Dir::Load, e, Swizzle::None, 128, BOX_ROWS, 0));
        out.push(mk(Dir::Load, e, Swizzle::B128, 64, BOX_ROWS, 0));
        for s in Swizzle::ALL {
            out.push(mk(Dir::Store, e, s, span_bytes(s), BOX_ROWS, 0));
        }
    }
    for (dir, s, inner) in [
        (Dir::Load, Swizzle::B128, 32),
        (Dir::Load, Swizzle::B64, 32),
        (Dir::Load, Swizzle::B32, 16),
        (Dir::Store, Swizzle::B128, 64),
    ] {
        out.push(mk(dir, 2, s, inner, BOX_ROWS, 0));
    }
    out.push(mk(Dir::Load, 2, Swizzle::B128, 128, 64, 0));
    for (s, at) in [
        (Swizzle::B32, 128),
        (Swizzle::B64, 128),
        (Swizzle::B128, 256),
        (Swizzle::B128, 512),
    ] {
        out.push(mk(Dir::Load, 2, s, span_bytes(s), BOX_ROWS, at));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_every_catalog_case_checks() {
        let all = catalog();
        assert_eq!(all.len(), 39);
        for c in &all {
            c.check().unwrap();
            assert_eq!(c.id().parse::<Case>().unwrap(), *c);
        }
        assert!(all.iter().any(|c| c.id() == "load.u16.128B.16x64"));
        assert!(all.iter().any(|c| c.id() == "load.u16.128B.16x64.at256"));
        assert!(all.iter().any(|c| c.id() == "store.u8.none.16x16"));
    }

    #[test]
    fn bad_cases_are_named() {
        let e = |s: &str| s.parse::<Case>().unwrap_err().to_string();
        assert!(e("load.u16.256B.16x64").contains("unknown swizzle"));
        assert!(e("load.u16.64B.16x64").contains("wider than the 64B swizzle span"));
        assert!(e("load.u16.none.16x4").contains("multiple of 16 bytes"));
        assert!(e("load.u8.none.300x16").contains("1..=256"));
        assert!(e("load.u64.none.16x16").contains("element type"));
        assert!(e("load.u16.128B.16x64.at100").contains("multiple of 128"));
        assert!(e("copy.u16.128B.16x64").contains("not a TMA case id"));
        assert!(e("load.u16.none.256x256").contains("more than the probe's"));
    }

    #[test]
    fn the_box_sits_inside_the_global_tensor() {
        for c in catalog() {
            let (gr, gc) = c.global_dims();
            let (r0, c0) = c.origin();
            assert!(r0 + c.box_rows <= gr && c0 + c.box_cols <= gc, "{c}");
            assert_eq!((gc * c.elem_bytes) % 16, 0, "{c}");
        }
    }
}
