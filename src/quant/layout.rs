//! Where each block's scale byte is stored: row-major (`linear`), or in the tiles block-scaled
//! GEMMs read without a rearranging pass.
//!
//! A tensor of shape [d0, ..., K] has `rows` = d0·…·d(n-2) (every axis but the last, as
//! FlashInfer's `fp4_quantize` flattens them) and `cols` = K/block scales a row; the scale of
//! row r, block c (elements r·K + c·block ..) is at byte `offset(r, c)`:
//!
//! - `linear`: r·cols + c.
//! - `128x4`, the layout cuBLAS documents as the "1D block scaling factors layout" (CUTLASS
//!   SM100 `Sm1xxBlockScaledConfig`, torchao `to_blocked`, FlashInfer `SfLayout.layout_128x4`):
//!   rows padded to a multiple of 128 (PR), cols to a multiple of 4 (PC); tiles of 128 rows × 4
//!   scales are 512 contiguous bytes, in row-major order of tiles; inside a tile row r' = r % 128
//!   is at (r' % 32)·16 + (r' / 32)·4, then the column c % 4:
//!   (r / 128)·(PC/4)·512 + (c / 4)·512 + (r % 32)·16 + ((r % 128) / 32)·4 + c % 4.
//! - `8x4`, FlashInfer's layout for GEMMs with a small M tile (`SfLayout.layout_8x4`,
//!   `get_sf_out_offset_8x4`), NVFP4 only: rows padded to a multiple of 8, cols to 4; tiles of
//!   8 rows × 4 scales are 32 contiguous bytes, row-major inside:
//!   (r / 8)·(PC/4)·32 + (c / 4)·32 + (r % 8)·4 + c % 4.
//!
//! Padding bytes (rows r ≥ rows, columns c ≥ cols of the padded grid) are zero. Swizzled scales
//! are stored as one axis of PR·PC bytes, as cuBLAS and `to_blocked` give them.

use super::Format;
use anyhow::{Result, bail};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the scale bytes are laid out (see the module docs for the exact offsets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum ScaleLayout {
    /// Row-major [..., K/block], no padding.
    #[default]
    #[value(name = "linear")]
    #[serde(rename = "linear")]
    Linear,
    /// 128-row × 4-scale tiles of 512 bytes (cuBLAS, CUTLASS SM100, torchao `to_blocked`).
    #[value(name = "128x4")]
    #[serde(rename = "128x4")]
    Tiled128x4,
    /// 8-row × 4-scale tiles of 32 bytes (FlashInfer's small-M NVFP4 layout).
    #[value(name = "8x4")]
    #[serde(rename = "8x4")]
    Tiled8x4,
}

/// Scales a tile holds along a row (both tiled layouts).
const TILE_COLS: usize = 4;

impl ScaleLayout {
    pub fn name(self) -> &'static str {
        match self {
            ScaleLayout::Linear => "linear",
            ScaleLayout::Tiled128x4 => "128x4",
            ScaleLayout::Tiled8x4 => "8x4",
        }
    }

    /// Rows of a tile (None: linear).
    pub fn tile_rows(self) -> Option<usize> {
        match self {
            ScaleLayout::Linear => None,
            ScaleLayout::Tiled128x4 => Some(128),
            ScaleLayout::Tiled8x4 => Some(8),
        }
    }

    /// The offset formula, as the module docs and the file's metadata give it.
    pub fn formula(self) -> &'static str {
        match self {
            ScaleLayout::Linear => "offset(r, c) = r*cols + c",
            ScaleLayout::Tiled128x4 => {
                "offset(r, c) = (r/128)*(PC/4)*512 + (c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4"
            }
            ScaleLayout::Tiled8x4 => "offset(r, c) = (r/8)*(PC/4)*32 + (c/4)*32 + (r%8)*4 + c%4",
        }
    }

    /// Refuse a layout the format's consumers do not read: 8x4 is FlashInfer's NVFP4 layout.
    pub fn check_format(self, format: Format) -> Result<()> {
        if self == ScaleLayout::Tiled8x4 && format == Format::Mxfp4 {
            bail!(
                "--scale-layout 8x4 is FlashInfer's layout for NVFP4 scales (SfLayout.layout_8x4, \
                 for GEMMs with a small M tile); MXFP4 scales are read linear or in 128x4 tiles \
                 (cuBLAS, CUTLASS, torchao, FlashInfer's mxfp4_quantize): use --scale-layout \
                 128x4 or linear, or --format nvfp4"
            );
        }
        Ok(())
    }

    /// Refuse a layout that does not apply to `format` or to a tensor of `shape`: the tiled
    /// layouts need rows (at least two axes).
    pub fn check(self, format: Format, shape: &[usize]) -> Result<()> {
        self.check_format(format)?;
        if let Some(r) = self.tile_rows()
            && shape.len() < 2
        {
            bail!(
                "--scale-layout {} stores the scales of {r} rows × {TILE_COLS} blocks a tile; a \
                 tensor of shape {shape:?} has no rows: give it a leading axis ([1, K]) or use \
                 --scale-layout linear",
                self.name()
            );
        }
        Ok(())
    }
}

/// The scale grid of one tensor: `rows` × `cols` scales, stored as `layout` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleGrid {
    pub layout: ScaleLayout,
    pub rows: usize,
    pub cols: usize,
}

impl ScaleGrid {
    /// The grid of a tensor of `shape` blocked by `block` along its last axis (a tensor with
    /// fewer than two axes is one row).
    pub fn new(layout: ScaleLayout, shape: &[usize], block: usize) -> ScaleGrid {
        let (rows, cols) = match shape.split_last() {
            Some((&k, lead)) => (lead.iter().product(), k / block),
            None => (1, 0),
        };
        ScaleGrid { layout, rows, cols }
    }

    /// Rows as stored: padded to the tile's rows.
    pub fn padded_rows(&self) -> usize {
        match self.layout.tile_rows() {
            Some(t) => self.rows.next_multiple_of(t),
            None => self.rows,
        }
    }

    /// Scales a row as stored: padded to 4 in the tiled layouts.
    pub fn padded_cols(&self) -> usize {
        match self.layout {
            ScaleLayout::Linear => self.cols,
            _ => self.cols.next_multiple_of(TILE_COLS),
        }
    }

    /// Bytes stored, padding included.
    pub fn len(&self) -> usize {
        self.padded_rows() * self.padded_cols()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Scales of the tensor (padding excluded).
    pub fn blocks(&self) -> usize {
        self.rows * self.cols
    }

    /// Bytes from one tile row (tile_rows rows) to the next; 0 for linear.
    pub fn row_tile_bytes(&self) -> usize {
        self.layout
            .tile_rows()
            .map_or(0, |t| t * self.padded_cols())
    }

    /// Where the scale of row `r`, block `c` is stored (module docs).
    pub fn offset(&self, r: usize, c: usize) -> usize {
        let tile_rows = match self.layout.tile_rows() {
            None => return r * self.cols + c,
            Some(t) => t,
        };
        let tile_bytes = tile_rows * TILE_COLS;
        let inner = match self.layout {
            ScaleLayout::Tiled128x4 => (r % 32) * 16 + ((r % 128) / 32) * 4,
            _ => (r % tile_rows) * TILE_COLS,
        };
        (r / tile_rows) * self.row_tile_bytes() + (c / TILE_COLS) * tile_bytes + inner + c % 4
    }

    /// Row-major scales (`rows·cols` bytes) in this layout, padding zero.
    pub fn arrange(&self, linear: &[u8]) -> Vec<u8> {
        debug_assert_eq!(linear.len(), self.blocks());
        if self.layout == ScaleLayout::Linear {
            return linear.to_vec();
        }
        let mut out = vec![0u8; self.len()];
        for (r, row) in linear.chunks(self.cols.max(1)).enumerate() {
            for (c, &s) in row.iter().enumerate() {
                out[self.offset(r, c)] = s;
            }
        }
        out
    }

    /// The row-major scales of bytes stored in this layout (`len()` of them).
    pub fn linear(&self, stored: &[u8]) -> Vec<u8> {
        debug_assert_eq!(stored.len(), self.len());
        if self.layout == ScaleLayout::Linear {
            return stored.to_vec();
        }
        (0..self.rows)
            .flat_map(|r| (0..self.cols).map(move |c| (r, c)))
            .map(|(r, c)| stored[self.offset(r, c)])
            .collect()
    }

    /// The shape of the stored `scale` tensor of a tensor of `shape`: [..., K/block] for linear,
    /// one axis of `len()` bytes for the tiled layouts.
    pub fn stored_shape(&self, shape: &[usize]) -> Vec<usize> {
        match self.layout {
            ScaleLayout::Linear => {
                let mut s = shape.to_vec();
                if let Some(k) = s.last_mut() {
                    *k = self.cols;
                }
                s
            }
            _ => vec![self.len()],
        }
    }

    /// What a file's metadata records of the layout: its name, the offset formula and the
    /// padding, with this tensor's numbers.
    pub fn metadata(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("scale_layout".into(), self.layout.name().into());
        m.insert(
            "scale_index".into(),
            format!(
                "{}; r < rows = {} (every axis but the last), c < cols = K/block = {}",
                self.layout.formula(),
                self.rows,
                self.cols
            ),
        );
        if let Some(t) = self.layout.tile_rows() {
            m.insert(
                "scale_padding".into(),
                format!(
                    "rows padded to a multiple of {t} (PR = {}), cols to a multiple of \
                     {TILE_COLS} (PC = {}); padding bytes are 0; scale holds PR*PC = {} bytes",
                    self.padded_rows(),
                    self.padded_cols(),
                    self.len()
                ),
            );
        }
        m
    }

    /// The layout a file's metadata names (`scale_layout`; linear without it) and the row-major
    /// scale shape [..., K/blocks] its `scale` stands for: a tiled `scale` is checked against
    /// the `data` shape and the metadata's `format` (`of_file`); a linear one is its own shape.
    pub fn of_metadata(
        metadata: &BTreeMap<String, String>,
        data_shape: &[usize],
        scale_shape: &[usize],
    ) -> Result<(ScaleLayout, Vec<usize>)> {
        let layout = match metadata.get("scale_layout") {
            None => ScaleLayout::Linear,
            Some(l) => ScaleLayout::from_str(l, false).map_err(|_| {
                anyhow::anyhow!("metadata scale_layout {l:?} is not linear, 128x4 or 8x4")
            })?,
        };
        if layout == ScaleLayout::Linear {
            return Ok((layout, scale_shape.to_vec()));
        }
        let format = metadata
            .get("format")
            .and_then(|f| Format::from_str(f, true).ok());
        let (_, rows_shape) = ScaleGrid::of_file(layout, format, data_shape, scale_shape)?;
        Ok((layout, rows_shape))
    }

    /// The grid a file's `data` shape ([..., K/2]) and metadata layout describe, refusing a
    /// `scale` shape that disagrees (named in the error). Returns the grid and the row-major
    /// scale shape [..., K/block] the file's linear checks then apply to.
    pub fn of_file(
        layout: ScaleLayout,
        format: Option<Format>,
        data_shape: &[usize],
        scale_shape: &[usize],
    ) -> Result<(ScaleGrid, Vec<usize>)> {
        let name = layout.name();
        let Some(format) = format else {
            bail!(
                "metadata scale_layout is {name} but there is no format (mxfp4 or nvfp4) to give \
                 the block size"
            );
        };
        let block = format.block();
        let Some((&half_k, lead)) = data_shape.split_last() else {
            bail!("'data' has no axes; a {name} layout needs [rows..., K/2]");
        };
        let k = half_k * 2;
        if k % block != 0 {
            bail!(
                "'data' {data_shape:?} holds {k} elements a row, not a multiple of the {} block \
                 ({block})",
                format.name()
            );
        }
        let mut logical = lead.to_vec();
        logical.push(k / block);
        layout.check(format, &logical)?;
        let grid = ScaleGrid::new(layout, &logical, 1);
        if scale_shape != [grid.len()] {
            bail!(
                "'scale' has shape {scale_shape:?}, but metadata scale_layout {name} for 'data' \
                 {data_shape:?} ({} rows × {} {} blocks) needs [{}]: {} rows padded to {} × {} \
                 blocks padded to {}",
                grid.rows,
                grid.cols,
                format.name(),
                grid.len(),
                grid.rows,
                grid.padded_rows(),
                grid.cols,
                grid.padded_cols()
            );
        }
        Ok((grid, logical))
    }

    /// The kernels' arguments for this grid (`kernels/quant/quant.cu`: scale_offset).
    pub fn kernel_geometry(&self) -> Result<KernelGeometry> {
        let too_big = |what: &str, v: usize| {
            anyhow::anyhow!(
                "{what} of {v} is more than the quantization kernels' 32-bit scale offsets hold"
            )
        };
        let cols = u32::try_from(self.cols.max(1)).map_err(|_| too_big("a row", self.cols))?;
        u32::try_from(self.len()).map_err(|_| too_big("a scale tensor", self.len()))?;
        // The banded kernels' group indices run to the padded rows' end and a band past the
        // last block, and their walk ends by wrapping below 0 (BandWalk): 2^31 bytes less a
        // band keep both inside 32 bits.
        if self.layout != ScaleLayout::Linear
            && self.len() + BAND_BLOCKS as usize > FAST_DIV_LIMIT as usize
        {
            bail!(
                "a tiled scale tensor of {} bytes is more than the quantization kernels' bands \
                 address (2^31 less {BAND_BLOCKS})",
                self.len()
            );
        }
        if self.blocks() > FAST_DIV_LIMIT as usize {
            return Err(too_big("a tensor of blocks", self.blocks()));
        }
        let row_tile_bytes = u32::try_from(self.row_tile_bytes())
            .map_err(|_| too_big("a tile row", self.row_tile_bytes()))?;
        let (magic, shift) = fast_div_magic(cols);
        let hcount = cols.div_ceil(BAND_BLOCKS);
        let (hmagic, hshift) = fast_div_magic(hcount);
        Ok(KernelGeometry {
            cols,
            magic,
            shift,
            row_tile_bytes,
            hcount,
            hmagic,
            hshift,
        })
    }
}

/// What the kernels need to place a scale: the row length in blocks, the magic number and shift
/// that divide by it (`fast_div_magic`), the bytes of a tile row, and the number of
/// `BAND_BLOCKS`-block pieces a row is cut into with its magic number and shift (the NVFP4
/// kernels take the tiled layouts' rows in bands of 8 rows over 64 blocks: quant.cu `Tiling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelGeometry {
    pub cols: u32,
    pub magic: u32,
    pub shift: u32,
    pub row_tile_bytes: u32,
    pub hcount: u32,
    pub hmagic: u32,
    pub hshift: u32,
}

/// Blocks of a row one CTA tile of the banded NVFP4 kernels covers (16 scale tiles of 4).
pub const BAND_BLOCKS: u32 = 64;

/// How the banded NVFP4 kernels (quant.cu: `Tiling` with bands, `tile_loop`) walk their CTA
/// tiles: a grid of `stride` CTAs, CTA b taking tiles b, b + stride, b + 2·stride, ... below
/// `tiles` (in tile order tiles - 1 - t when the tiles are taken from the end). The stride is
/// whole tile rows (a tile row is tile_rows / 8 bands of H tiles), so a CTA's tiles lie in one
/// band of the tile row and one column range, whole tile rows apart: its groups move by
/// `step_g` and its scale bytes by `step_scale` (wrapping; negative from the end), and its walk
/// ends where its scale offset leaves the `scale_bytes` (from the end, by wrapping below 0 to
/// at least 2^32 − step_scale, which is not below scale_bytes since they are at most 2^31:
/// kernel_geometry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandWalk {
    pub tiles: u32,
    pub stride: u32,
    pub step_g: u32,
    pub step_scale: u32,
    pub scale_bytes: u32,
}

impl BandWalk {
    /// The walk of `grid` (a tiled layout) with at most `max_ctas` CTAs (None: one CTA a tile):
    /// the largest whole number of tile rows' tiles within it, at least one tile row.
    pub fn new(
        grid: &ScaleGrid,
        k: &KernelGeometry,
        max_ctas: Option<u64>,
        reverse: bool,
    ) -> Result<Self> {
        let Some(tile_rows) = grid.layout.tile_rows() else {
            bail!("the linear layout is quantized in row order, not in bands");
        };
        let row_tiles = (tile_rows / 8) as u64 * k.hcount as u64;
        let tiles = grid.rows.div_ceil(tile_rows).max(1) as u64 * row_tiles;
        let stride_rows = (max_ctas.map_or(tiles, |m| m.min(tiles)) / row_tiles).max(1);
        // Within kernel_geometry's bounds every product below is exact and fits.
        let u32_of = |v: u64| {
            u32::try_from(v).map_err(|_| {
                anyhow::anyhow!("a band walk of {v} is more than the kernels' 32-bit offsets hold")
            })
        };
        let step_g = u32_of(stride_rows * tile_rows as u64 * k.cols as u64)?;
        let step_scale = u32_of(stride_rows * k.row_tile_bytes as u64)?;
        let (step_g, step_scale) = if reverse {
            (step_g.wrapping_neg(), step_scale.wrapping_neg())
        } else {
            (step_g, step_scale)
        };
        Ok(BandWalk {
            tiles: u32_of(tiles)?,
            stride: u32_of(stride_rows * row_tiles)?,
            step_g,
            step_scale,
            scale_bytes: u32_of(grid.len() as u64)?,
        })
    }
}

/// Block indices the kernels' division serves: below 2^31 (a tensor the kernels index has
/// fewer than 2^35 elements, so fewer than 2^31 blocks of 16).
pub const FAST_DIV_LIMIT: u32 = 1 << 31;

/// Magic number m and shift l with n / d = ⌊2n·m / 2^32⌋ >> l for every n < 2^31: Granlund and
/// Montgomery, "Division by invariant integers using multiplication" (1994), theorem 4.2 with
/// N = 31, l = ⌈log2 d⌉ and m = ⌈2^(31+l) / d⌉ (below 2^32). The kernels divide a block index by
/// the row length this way, in three instructions, two of them on the FMA pipe: an integer
/// division by a run-time value is a long sequence, and the kernels' integer ALU is their
/// bottleneck.
pub fn fast_div_magic(d: u32) -> (u32, u32) {
    assert!(d > 0, "division by zero");
    let l = 32 - (d - 1).leading_zeros();
    let m = (1u64 << (31 + l)).div_ceil(d as u64);
    (u32::try_from(m).expect("m < 2^32 for every d"), l)
}

/// The kernels' division (`fast_div` in quant.cu), for the tests: n < 2^31.
pub fn fast_div(n: u32, magic: u32, shift: u32) -> u32 {
    (((2 * n as u64) * magic as u64) >> 32 >> shift) as u32
}

#[cfg(test)]
mod tests;
