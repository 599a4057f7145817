//! The layouts against vectors that do not come from this code, and the properties every
//! layout must have (in bounds, one byte per scale, padding zero, reversible).

use super::*;
use serde::Deserialize;

#[test]
fn tiled_128x4_matches_the_offsets_nvidia_documents() {
    // nvmath-python's get_block_scale_offset (cuBLAS's layout), its worked example: NVFP4
    // operand a of 128 × 128, so 8 blocks of 16 a row; block (5, 2) is at 82, (5, 5) at 593.
    let g = ScaleGrid::new(ScaleLayout::Tiled128x4, &[128, 128], 16);
    assert_eq!((g.rows, g.cols, g.len()), (128, 8, 1024));
    assert_eq!(g.offset(5, 2), 82);
    assert_eq!(g.offset(5, 5), 593);
}

#[derive(Deserialize)]
struct Case {
    layout: String,
    rows: usize,
    cols: usize,
    /// Per stored byte: the row-major index of its scale, or -1 for padding.
    source: Vec<i64>,
}

#[test]
fn tiled_layouts_equal_the_independent_python_vectors() {
    // tests/vectors/scale_layout/generate.py: torchao's to_blocked and FlashInfer's 8x4 layout
    // rebuilt as reshapes and axis permutations of the padded matrix (no offset formula).
    let cases: Vec<Case> = serde_json::from_str(include_str!(
        "../../../tests/vectors/scale_layout/layouts.json"
    ))
    .unwrap();
    assert_eq!(cases.len(), 10);
    for case in cases {
        let layout = <ScaleLayout as ValueEnum>::from_str(&case.layout, false).unwrap();
        let g = ScaleGrid {
            layout,
            rows: case.rows,
            cols: case.cols,
        };
        let name = format!("{} {}x{}", case.layout, case.rows, case.cols);
        assert_eq!(g.len(), case.source.len(), "{name}: bytes");
        // Scale i holds the value i + 1 (never 0, so padding is told apart).
        let linear: Vec<u8> = (0..g.blocks()).map(|i| (i % 255 + 1) as u8).collect();
        let stored = g.arrange(&linear);
        for (byte, (&got, &src)) in stored.iter().zip(&case.source).enumerate() {
            let want = if src < 0 { 0 } else { linear[src as usize] };
            assert_eq!(got, want, "{name}: byte {byte} (source {src})");
        }
        assert_eq!(g.linear(&stored), linear, "{name}: back to row-major");
    }
}

const LAYOUTS: [ScaleLayout; 3] = [
    ScaleLayout::Linear,
    ScaleLayout::Tiled128x4,
    ScaleLayout::Tiled8x4,
];

/// Every layout's grid of every shape (blocks of 16).
fn grids() -> impl Iterator<Item = (ScaleGrid, Vec<usize>)> {
    LAYOUTS.into_iter().flat_map(|l| {
        shapes()
            .into_iter()
            .map(move |s| (ScaleGrid::new(l, &s, 16), s))
    })
}

/// The (row, block) of every scale of `g`, row-major.
fn cells(g: &ScaleGrid) -> impl Iterator<Item = (usize, usize)> + use<> {
    let cols = g.cols;
    (0..g.rows).flat_map(move |r| (0..cols).map(move |c| (r, c)))
}

fn shapes() -> Vec<Vec<usize>> {
    vec![
        vec![1, 16],
        vec![3, 48],
        vec![7, 5, 64],
        vec![127, 80],
        vec![128, 64],
        vec![129, 96],
        vec![300, 16 * 9],
        vec![2, 130, 16 * 6],
        // rows of more than 64 blocks: several 64-block bands a row (quant.cu: Tiling)
        vec![37, 16 * 130],
        vec![135, 16 * 67],
    ]
}

#[test]
fn every_scale_has_its_own_byte_inside_the_padded_grid() {
    for (g, shape) in grids() {
        let layout = g.layout;
        let mut seen = vec![false; g.len()];
        for (r, c) in cells(&g) {
            let o = g.offset(r, c);
            assert!(o < g.len(), "{layout:?} {shape:?}: ({r}, {c}) at {o}");
            assert!(!seen[o], "{layout:?} {shape:?}: ({r}, {c}) shares byte {o}");
            seen[o] = true;
        }
        let padding = seen.iter().filter(|&&s| !s).count();
        assert_eq!(padding, g.len() - g.blocks(), "{layout:?} {shape:?}");
        // The whole padded grid is a permutation too: the padding fills the rest.
        if let Some(t) = layout.tile_rows() {
            assert_eq!(g.padded_rows() % t, 0);
            assert_eq!(g.padded_cols() % 4, 0);
            let full = ScaleGrid {
                rows: g.padded_rows(),
                cols: g.padded_cols(),
                ..g
            };
            let mut offsets: Vec<usize> = cells(&full).map(|(r, c)| full.offset(r, c)).collect();
            offsets.sort_unstable();
            assert!(
                offsets.iter().copied().eq(0..full.len()),
                "{layout:?} {shape:?}"
            );
        }
    }
}

#[test]
fn padding_is_zero_and_the_layout_reverses() {
    for (g, shape) in grids() {
        let layout = g.layout;
        let linear: Vec<u8> = (0..g.blocks()).map(|i| (i % 251 + 1) as u8).collect();
        let stored = g.arrange(&linear);
        assert_eq!(stored.len(), g.len());
        assert_eq!(
            stored.iter().filter(|&&b| b == 0).count(),
            g.len() - g.blocks(),
            "{layout:?} {shape:?}: zero bytes are exactly the padding"
        );
        assert_eq!(g.linear(&stored), linear, "{layout:?} {shape:?}");
    }
}

#[test]
fn padding_rule_and_stored_shapes() {
    let g = ScaleGrid::new(ScaleLayout::Tiled128x4, &[2, 100, 16 * 6], 16);
    assert_eq!((g.rows, g.cols), (200, 6));
    assert_eq!((g.padded_rows(), g.padded_cols(), g.len()), (256, 8, 2048));
    assert_eq!(g.stored_shape(&[2, 100, 96]), vec![2048]);
    let e = ScaleGrid::new(ScaleLayout::Tiled8x4, &[13, 32 * 5], 32);
    assert_eq!((e.padded_rows(), e.padded_cols(), e.len()), (16, 8, 128));
    let l = ScaleGrid::new(ScaleLayout::Linear, &[2, 100, 96], 16);
    assert_eq!(
        (l.len(), l.stored_shape(&[2, 100, 96])),
        (1200, vec![2, 100, 6])
    );
    // The 512-byte tiles of 128x4: (r, c) = (0, 4) starts the second tile; row 32 sits 4
    // bytes into the first 16-byte line.
    assert_eq!(g.offset(0, 4), 512);
    assert_eq!(g.offset(32, 0), 4);
    assert_eq!(g.offset(1, 0), 16);
    assert_eq!(g.offset(128, 0), 1024);
    assert_eq!(e.offset(8, 0), 64);
    assert_eq!(e.offset(1, 5), 32 + 4 + 1);
}

#[test]
fn layouts_that_do_not_apply_are_refused() {
    let e = ScaleLayout::Tiled8x4
        .check(Format::Mxfp4, &[4, 64])
        .unwrap_err()
        .to_string();
    assert!(e.contains("8x4") && e.contains("NVFP4"), "{e}");
    for layout in [ScaleLayout::Tiled128x4, ScaleLayout::Tiled8x4] {
        let e = layout.check(Format::Nvfp4, &[64]).unwrap_err().to_string();
        assert!(e.contains("no rows") && e.contains("[64]"), "{e}");
    }
    ScaleLayout::Linear.check(Format::Mxfp4, &[64]).unwrap();
    ScaleLayout::Tiled128x4
        .check(Format::Mxfp4, &[1, 64])
        .unwrap();
    ScaleLayout::Tiled8x4
        .check(Format::Nvfp4, &[3, 2, 64])
        .unwrap();
}

#[test]
fn a_file_whose_scale_disagrees_with_its_metadata_is_refused() {
    let (g, logical) = ScaleGrid::of_file(
        ScaleLayout::Tiled128x4,
        Some(Format::Nvfp4),
        &[3, 40, 48],
        &[128 * 8],
    )
    .unwrap();
    assert_eq!((g.rows, g.cols, logical), (120, 6, vec![3, 40, 6]));
    let e = ScaleGrid::of_file(
        ScaleLayout::Tiled128x4,
        Some(Format::Nvfp4),
        &[120, 48],
        &[120, 6],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("[1024]") && e.contains("[120, 6]"), "{e}");
    let e = ScaleGrid::of_file(ScaleLayout::Tiled8x4, None, &[8, 8], &[32])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no format"), "{e}");
    let e = ScaleGrid::of_file(ScaleLayout::Tiled8x4, Some(Format::Nvfp4), &[8, 12], &[32])
        .unwrap_err()
        .to_string();
    assert!(e.contains("24 elements"), "{e}");
}

#[test]
fn metadata_names_the_layout_formula_and_padding() {
    let g = ScaleGrid::new(ScaleLayout::Tiled128x4, &[200, 96], 16);
    let m = g.metadata();
    assert_eq!(m["scale_layout"], "128x4");
    assert!(m["scale_index"].contains("(r%32)*16") && m["scale_index"].contains("rows = 200"));
    assert!(m["scale_padding"].contains("PR = 256") && m["scale_padding"].contains("PC = 8"));
    let l = ScaleGrid::new(ScaleLayout::Linear, &[200, 96], 16).metadata();
    assert_eq!(l["scale_layout"], "linear");
    assert!(!l.contains_key("scale_padding"));
}

#[test]
fn fast_division_is_exact() {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut divisors: Vec<u32> = (1..=4100).collect();
    divisors.extend([
        u32::MAX,
        u32::MAX - 1,
        1 << 31,
        (1 << 31) + 1,
        (1 << 31) - 1,
        65535,
        65537,
    ]);
    divisors.extend((0..200).map(|_| next() as u32 | 1));
    for d in divisors {
        let (m, l) = fast_div_magic(d);
        let max = FAST_DIV_LIMIT - 1;
        let mut ns = vec![0, 1, d - 1, d, d.wrapping_add(1), max, max - 1];
        ns.extend((1..=3u64).filter_map(|k| u32::try_from(k * d as u64 - 1).ok()));
        ns.extend((0..300).map(|_| next() as u32));
        ns.extend((0..100).map(|_| (next() as u32) >> (next() % 32)));
        for n in ns.into_iter().map(|n| n % FAST_DIV_LIMIT) {
            assert_eq!(fast_div(n, m, l), n / d, "{n} / {d} (m {m}, l {l})");
        }
    }
}

/// The offset the kernels compute (quant.cu: scale_offset), from the block index alone.
fn kernel_offset(g: &ScaleGrid, k: &KernelGeometry, b: u32) -> u32 {
    let row = fast_div(b, k.magic, k.shift);
    let col = b - row * k.cols;
    let w = std::num::Wrapping;
    let (row, col, rt) = (w(row), w(col), w(k.row_tile_bytes));
    let off = match g.layout {
        ScaleLayout::Linear => return b,
        ScaleLayout::Tiled128x4 => {
            (row >> 7) * (rt - w(2048)) + row * w(16) - ((row >> 5) & w(3)) * w(508) + col * w(128)
                - (col & w(3)) * w(127)
        }
        ScaleLayout::Tiled8x4 => {
            (row >> 3) * (rt - w(32)) + row * w(4) + col * w(8) - (col & w(3)) * w(7)
        }
    };
    off.0
}

#[test]
fn the_kernels_arithmetic_gives_the_same_offsets() {
    for (g, shape) in grids() {
        let k = g.kernel_geometry().unwrap();
        for (r, c) in cells(&g) {
            let b = (r * g.cols + c) as u32;
            assert_eq!(
                kernel_offset(&g, &k, b) as usize,
                g.offset(r, c),
                "{:?} {shape:?} ({r}, {c})",
                g.layout
            );
        }
    }
}

/// The groups the banded NVFP4 kernels (quant.cu: `Tiling` with BANDS, `tile_loop`) store, as
/// (row, block, scale offset), on `walk`: CTA b's first tile is b (tiles - 1 - b from the
/// end) and its place comes from the tile index (`where`); the next tiles' places are stepped,
/// until the scale offset leaves the scale bytes. A group is stored when its index is below the
/// group count and its block inside the row.
fn banded_stores(
    g: &ScaleGrid,
    k: &KernelGeometry,
    walk: &BandWalk,
    reverse: bool,
) -> Vec<(usize, usize, usize)> {
    let (tile_rows, bands_per_tile_row) = match g.layout {
        ScaleLayout::Tiled128x4 => (128u32, 16u32),
        ScaleLayout::Tiled8x4 => (8, 1),
        ScaleLayout::Linear => unreachable!("linear scales are stored in row order"),
    };
    let groups = (g.rows * g.cols) as u32;
    let mut out = Vec::new();
    for cta in 0..walk.stride.min(walk.tiles) {
        let tile = if reverse { walk.tiles - 1 - cta } else { cta };
        let band = fast_div(tile, k.hmagic, k.hshift);
        let h = tile - band * k.hcount;
        let (tile_row, sector) = (band / bands_per_tile_row, band % bands_per_tile_row);
        for thread in 0..256u32 {
            // group 0 in the band's first 4 rows (128x4: 2k + 32i; 8x4: i), group 1 a row on
            // (128x4) or 4 rows on (8x4), 16 bytes on in the scale sector
            let (warp, lane) = (thread >> 5, thread & 31);
            let i = lane >> 3;
            let (q, next_row) = match g.layout {
                ScaleLayout::Tiled128x4 => (32 * i, 1),
                _ => (i, 4),
            };
            let row = tile_row * tile_rows + 2 * sector + q;
            let col = h * 64 + warp * 8 + (lane & 7);
            let mut gi = row * k.cols + col;
            let mut scale = tile_row * k.row_tile_bytes
                + h * (16 * 4 * tile_rows)
                + (2 * warp + ((lane >> 2) & 1)) * (4 * tile_rows)
                + sector * 32
                + 4 * i
                + (lane & 3);
            let cols_left = k.cols as i64 - col as i64;
            while scale < walk.scale_bytes {
                for u in 0..2u32 {
                    let gu = gi.wrapping_add(u * next_row * k.cols);
                    if gu < groups && cols_left > 0 {
                        let s = scale + u * 16;
                        out.push(((gu / k.cols) as usize, (gu % k.cols) as usize, s as usize));
                    }
                }
                gi = gi.wrapping_add(walk.step_g);
                scale = scale.wrapping_add(walk.step_scale);
            }
        }
    }
    out
}

#[test]
fn banded_kernels_store_every_scale_once_where_the_layout_puts_it() {
    for (g, shape) in grids().filter(|(g, _)| g.layout != ScaleLayout::Linear) {
        let k = g.kernel_geometry().unwrap();
        let row_tiles = (g.layout.tile_rows().unwrap() / 8) as u64 * k.hcount as u64;
        let want: Vec<_> = cells(&g).map(|(r, c)| (r, c, g.offset(r, c))).collect();
        // one CTA a tile; caps below one tile row, between tile rows, and of several rows
        for max_ctas in [None, Some(1), Some(row_tiles + 1), Some(3 * row_tiles + 5)] {
            for reverse in [false, true] {
                let walk = BandWalk::new(&g, &k, max_ctas, reverse).unwrap();
                let name = format!(
                    "{:?} {shape:?} cap {max_ctas:?} reverse {reverse}",
                    g.layout
                );
                assert_eq!(walk.stride as u64 % row_tiles, 0, "{name}");
                assert!(walk.stride <= walk.tiles, "{name}");
                let mut stores = banded_stores(&g, &k, &walk, reverse);
                for &(r, c, off) in &stores {
                    assert_eq!(off, g.offset(r, c), "{name}: ({r}, {c})");
                }
                stores.sort();
                assert_eq!(stores, want, "{name}");
            }
        }
    }
}

#[test]
fn a_band_walk_from_the_end_leaves_the_scale_bytes_at_the_largest_grids() {
    // The largest tiled grids kernel_geometry takes: a reverse walk's step below 0 wraps to at
    // least its step (2^32 less the tile rows' bytes), past the scale bytes; a tile row more is
    // refused.
    for layout in [ScaleLayout::Tiled128x4, ScaleLayout::Tiled8x4] {
        let tile_rows = layout.tile_rows().unwrap();
        let cols = 4 * 1024;
        let rows =
            ((FAST_DIV_LIMIT as usize - BAND_BLOCKS as usize) / cols) / tile_rows * tile_rows;
        let g = ScaleGrid { layout, rows, cols };
        let k = g.kernel_geometry().unwrap();
        for max_ctas in [None, Some(1)] {
            let walk = BandWalk::new(&g, &k, max_ctas, true).unwrap();
            assert!(
                walk.step_scale >= walk.scale_bytes,
                "{layout:?} {max_ctas:?}"
            );
        }
        let over = ScaleGrid {
            layout,
            rows: rows + tile_rows,
            cols,
        };
        let err = over.kernel_geometry().unwrap_err().to_string();
        assert!(err.contains("tiled scale tensor"), "{err}");
    }
}
