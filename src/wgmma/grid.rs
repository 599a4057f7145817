//! The wgmma maps as grids, for the pictures and the viewer: which thread, register and element
//! hold each cell of a register operand (64 × N for D and C, 64 × K for A), and where each
//! element of a shared-memory tile lies (byte from the descriptor's start, and for b1 the bit).
//!
//! Both are read from the map records as they are; nothing here assumes the documented layout.
//! A cell no slot claims is empty; a cell two slots claim keeps the first (a failed map can do
//! that), so any record gives a grid.

use super::map::{RegMap, WgLaneMap, WgSmemMap};
use super::{M, THREADS, WgVariant};
use anyhow::{Result, bail};

/// Who holds one cell of a register operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Thread 0..127 of the warpgroup (the maps' `lane`).
    pub thread: u32,
    pub reg: u32,
    pub elem: u32,
}

impl Owner {
    pub fn warp(&self) -> u32 {
        self.thread / 32
    }
    pub fn lane(&self) -> u32 {
        self.thread % 32
    }
}

/// A maximal run of cells along one row held by one thread in consecutive slots (register
/// element after register element), left to right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub row: u32,
    pub col: u32,
    pub len: u32,
    pub thread: u32,
    /// Slot of the first cell within the thread: `reg · elems_per_reg + elem`.
    pub first: u32,
}

impl Run {
    /// The registers the run covers: `r2` (all of one register), `r2.e1`, `r2.e0–1`, `r2–3`
    /// (whole registers), `r2.e1–r3.e0`.
    pub fn regs(&self, elems_per_reg: u32) -> String {
        let epr = elems_per_reg.max(1);
        let (a, b) = (self.first, self.first + self.len - 1);
        let (ra, ea, rb, eb) = (a / epr, a % epr, b / epr, b % epr);
        let whole = ea == 0 && eb == epr - 1;
        match (ra == rb, whole) {
            (true, true) => format!("r{ra}"),
            (false, true) => format!("r{ra}–{rb}"),
            (true, false) if ea == eb => format!("r{ra}.e{ea}"),
            (true, false) => format!("r{ra}.e{ea}–{eb}"),
            (false, false) => format!("r{ra}.e{ea}–r{rb}.e{eb}"),
        }
    }
}

/// One register operand as a grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegGrid {
    /// `A`, `C` or `D`.
    pub operand: String,
    pub rows: u32,
    pub cols: u32,
    pub regs: u32,
    pub elems_per_reg: u32,
    cells: Vec<Option<Owner>>,
}

/// (rows, cols) of a register operand of `v`: A is m64 × K (K/2 sparse), C and D m64 × N.
pub fn reg_shape(v: &WgVariant, operand: &str) -> Option<(u32, u32)> {
    match operand {
        "A" => Some((M, v.a_k())),
        "C" | "D" => Some((M, v.n)),
        _ => None,
    }
}

impl RegGrid {
    pub fn new(m: &RegMap, rows: u32, cols: u32) -> Self {
        let mut cells = vec![None; (rows * cols) as usize];
        for &[thread, reg, elem, r, c] in &m.slots {
            if r < rows && c < cols {
                let i = (r * cols + c) as usize;
                if cells[i].is_none() {
                    cells[i] = Some(Owner { thread, reg, elem });
                }
            }
        }
        RegGrid {
            operand: m.operand.clone(),
            rows,
            cols,
            regs: m.regs,
            elems_per_reg: m.elems_per_reg,
            cells,
        }
    }

    /// Every register operand of a lane map (A first where it has one, then D, then C).
    pub fn all(map: &WgLaneMap, v: &WgVariant) -> Vec<RegGrid> {
        ["A", "D", "C"]
            .into_iter()
            .filter_map(|op| {
                let m = map.registers.iter().find(|m| m.operand == op)?;
                let (rows, cols) = reg_shape(v, op)?;
                Some(RegGrid::new(m, rows, cols))
            })
            .collect()
    }

    pub fn at(&self, row: u32, col: u32) -> Option<Owner> {
        if row < self.rows && col < self.cols {
            self.cells[(row * self.cols + col) as usize]
        } else {
            None
        }
    }

    /// Slot of `o` within its thread.
    fn slot(&self, o: Owner) -> u32 {
        o.reg * self.elems_per_reg + o.elem
    }

    /// The runs of every row, rows in order, each row's in column order.
    pub fn runs(&self) -> Vec<Run> {
        let mut out = Vec::new();
        for row in 0..self.rows {
            let mut col = 0;
            while col < self.cols {
                let Some(o) = self.at(row, col) else {
                    col += 1;
                    continue;
                };
                let first = self.slot(o);
                let mut len = 1;
                while let Some(n) = self.at(row, col + len)
                    && n.thread == o.thread
                    && self.slot(n) == first + len
                {
                    len += 1;
                }
                out.push(Run {
                    row,
                    col,
                    len,
                    thread: o.thread,
                    first,
                });
                col += len;
            }
        }
        out
    }

    /// The warp holding every cell of `row`, if one warp does.
    pub fn row_warp(&self, row: u32) -> Option<u32> {
        let mut w = None;
        for col in 0..self.cols {
            let o = self.at(row, col)?.warp();
            if *w.get_or_insert(o) != o {
                return None;
            }
        }
        w
    }

    /// Rows and columns where `warp` holds at least one cell.
    pub fn warp_extent(&self, warp: u32) -> (Vec<u32>, Vec<u32>) {
        let rows = (0..self.rows)
            .filter(|&r| (0..self.cols).any(|c| self.at(r, c).is_some_and(|o| o.warp() == warp)))
            .collect();
        let cols = (0..self.cols)
            .filter(|&c| (0..self.rows).any(|r| self.at(r, c).is_some_and(|o| o.warp() == warp)))
            .collect();
        (rows, cols)
    }

    /// Cells no slot holds.
    pub fn empty_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.is_none()).count()
    }

    /// Whether another grid puts every slot on the same cell.
    pub fn same_cells(&self, other: &RegGrid) -> bool {
        self.rows == other.rows && self.cols == other.cols && self.cells == other.cells
    }
}

/// Where one element of a shared-memory tile lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Byte from the descriptor's start.
    pub byte: i64,
    /// Bit within the byte (b1; 0 otherwise).
    pub bit: u32,
}

/// What one 16-byte chunk of shared memory holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkHolds {
    /// Elements of one row: `row`, columns from `first`; `block` = first / elements per chunk.
    Row { row: u32, first: u32, last: u32 },
    /// Elements of one column: `col`, rows from `first`.
    Col { col: u32, first: u32, last: u32 },
    /// Elements of several rows and columns.
    Mixed { elements: u32 },
}

/// A shared-memory tile as a grid of elements, and as the 16-byte chunks they fill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileGrid {
    /// `A` (rows m, cols k) or `B` (rows k, cols n).
    pub operand: String,
    pub rows: u32,
    pub cols: u32,
    pub elem_bits: u32,
    cells: Vec<Option<Place>>,
}

impl TileGrid {
    /// From `[byte, bit, row, col]` entries of a `rows × cols` tile.
    pub fn new(operand: &str, entries: &[[i64; 4]], rows: u32, cols: u32, elem_bits: u32) -> Self {
        let mut cells = vec![None; (rows * cols) as usize];
        for &[byte, bit, r, c] in entries {
            if (0..rows as i64).contains(&r) && (0..cols as i64).contains(&c) {
                let i = (r as u32 * cols + c as u32) as usize;
                if cells[i].is_none() {
                    cells[i] = Some(Place {
                        byte,
                        bit: bit.clamp(0, 7) as u32,
                    });
                }
            }
        }
        TileGrid {
            operand: operand.into(),
            rows,
            cols,
            elem_bits,
            cells,
        }
    }

    /// The A and B tiles of a study (A m64 × K, B K × N of its variant).
    pub fn of_study(m: &WgSmemMap, v: &WgVariant) -> [TileGrid; 2] {
        [
            TileGrid::new("A", &m.a, M, v.a_k(), m.elem_bits),
            TileGrid::new("B", &m.b, v.k, v.n, m.elem_bits),
        ]
    }

    /// The shared-memory tiles a lane map records: A's (`ss`) and B's.
    pub fn of_lane_map(m: &WgLaneMap, v: &WgVariant) -> Vec<TileGrid> {
        let bits = v.elem_bits();
        let mut out = Vec::new();
        if let Some(a) = &m.smem_a {
            out.push(TileGrid::new("A", a, M, v.a_k(), bits));
        }
        out.push(TileGrid::new("B", &m.smem_b, v.k, v.n, bits));
        out
    }

    pub fn at(&self, row: u32, col: u32) -> Option<Place> {
        if row < self.rows && col < self.cols {
            self.cells[(row * self.cols + col) as usize]
        } else {
            None
        }
    }

    /// Elements one 16-byte chunk holds when packed.
    pub fn per_chunk(&self) -> u32 {
        (128 / self.elem_bits.max(1)).max(1)
    }

    /// Every chunk some element lies in (index = byte / 16, from the descriptor's start), in
    /// address order, with what it holds.
    pub fn chunks(&self) -> Vec<(i64, ChunkHolds)> {
        let mut by: std::collections::BTreeMap<i64, Vec<(u32, u32)>> = Default::default();
        for r in 0..self.rows {
            for c in 0..self.cols {
                if let Some(p) = self.at(r, c) {
                    by.entry(p.byte.div_euclid(16)).or_default().push((r, c));
                }
            }
        }
        by.into_iter()
            .map(|(i, els)| {
                let (r0, c0) = els[0];
                let holds = if els.iter().all(|e| e.0 == r0) {
                    let cs = els.iter().map(|e| e.1);
                    ChunkHolds::Row {
                        row: r0,
                        first: cs.clone().min().unwrap_or(c0),
                        last: cs.max().unwrap_or(c0),
                    }
                } else if els.iter().all(|e| e.1 == c0) {
                    let rs = els.iter().map(|e| e.0);
                    ChunkHolds::Col {
                        col: c0,
                        first: rs.clone().min().unwrap_or(r0),
                        last: rs.max().unwrap_or(r0),
                    }
                } else {
                    ChunkHolds::Mixed {
                        elements: els.len() as u32,
                    }
                };
                (i, holds)
            })
            .collect()
    }

    pub fn empty_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.is_none()).count()
    }
}

/// (row, col) names of a register or shared-memory operand's matrix.
pub fn axis_names(operand: &str) -> (&'static str, &'static str) {
    match operand {
        "A" => ("m", "k"),
        "B" => ("k", "n"),
        _ => ("m", "n"),
    }
}

/// Check a lane map's records against its variant's geometry, naming the first problem: the
/// pictures and the viewer then index only inside the tiles.
pub fn check_lane_map(m: &WgLaneMap) -> Result<WgVariant> {
    let Some(v) = super::find(&m.variant) else {
        bail!("variant '{}' is not in the wgmma catalog", m.variant);
    };
    for r in &m.registers {
        let (frag, (rows, cols)) = match (r.operand.as_str(), reg_shape(&v, &r.operand)) {
            ("A", Some(s)) => (v.a_frag(), s),
            (_, Some(s)) => (v.d_frag(), s),
            (other, None) => bail!("register operand '{other}' is not A, C or D"),
        };
        if (r.regs, r.elems_per_reg) != (frag.regs, frag.elems_per_reg) {
            bail!(
                "{}: {} registers × {} elements, but {} holds {} × {} per thread",
                r.operand,
                r.regs,
                r.elems_per_reg,
                m.variant,
                frag.regs,
                frag.elems_per_reg
            );
        }
        if let Some(s) = r.slots.iter().find(|&&[t, reg, e, row, col]| {
            t >= THREADS || reg >= r.regs || e >= r.elems_per_reg || row >= rows || col >= cols
        }) {
            bail!(
                "{} slot {:?} is outside the {rows}×{cols} operand or the warpgroup's registers",
                r.operand,
                s
            );
        }
    }
    let bits = v.elem_bits();
    if let Some(a) = &m.smem_a {
        check_tile("smem_a", a, M, v.a_k(), bits)?;
    }
    check_tile("smem_b", &m.smem_b, v.k, v.n, bits)?;
    Ok(v)
}

/// Check a study's records against its variant.
pub fn check_study(m: &WgSmemMap) -> Result<WgVariant> {
    let Some(v) = super::find(&m.variant) else {
        bail!("variant '{}' is not in the wgmma catalog", m.variant);
    };
    if m.elem_bits != v.elem_bits() {
        bail!(
            "elem_bits {} is not the {} bits of {}'s elements",
            m.elem_bits,
            v.elem_bits(),
            m.variant
        );
    }
    check_tile("a", &m.a, M, v.a_k(), m.elem_bits)?;
    check_tile("b", &m.b, v.k, v.n, m.elem_bits)?;
    Ok(v)
}

/// Shared memory a block can address: no element of a tile lies further from its start.
const SMEM_SPAN: i64 = 1 << 18;

fn check_tile(field: &str, e: &[[i64; 4]], rows: u32, cols: u32, bits: u32) -> Result<()> {
    if let Some(x) = e.iter().find(|&&[byte, bit, r, c]| {
        !(0..rows as i64).contains(&r)
            || !(0..cols as i64).contains(&c)
            || !(-SMEM_SPAN..SMEM_SPAN).contains(&byte)
            || !(0..8).contains(&bit)
            || (bits >= 8 && bit != 0)
    }) {
        bail!(
            "{field} entry {x:?} ([byte, bit, row, col]) is outside the {rows}×{cols} tile or \
             shared memory"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(slots: Vec<[u32; 5]>, regs: u32, epr: u32) -> RegMap {
        RegMap {
            operand: "D".into(),
            regs,
            elems_per_reg: epr,
            slots,
        }
    }

    #[test]
    fn runs_follow_consecutive_slots_of_one_thread() {
        // Row 0: thread 1 r0 r1 (one element each), thread 2 r1 r0 (not consecutive: two runs).
        let m = reg(
            vec![
                [1, 0, 0, 0, 0],
                [1, 1, 0, 0, 1],
                [2, 1, 0, 0, 2],
                [2, 0, 0, 0, 3],
            ],
            2,
            1,
        );
        let g = RegGrid::new(&m, 1, 5);
        let runs = g.runs();
        assert_eq!(runs.len(), 3);
        assert_eq!((runs[0].len, runs[0].regs(1)), (2, "r0–1".to_string()));
        assert_eq!((runs[1].col, runs[1].regs(1)), (2, "r1".to_string()));
        assert_eq!(g.at(0, 4), None);
        assert_eq!(g.empty_cells(), 1);
        assert_eq!(g.row_warp(0), None, "an empty cell: no single warp");
        let r = Run {
            row: 0,
            col: 0,
            len: 2,
            thread: 0,
            first: 1,
        };
        assert_eq!(r.regs(4), "r0.e1–2");
        assert_eq!(Run { len: 4, ..r }.regs(4), "r0.e1–r1.e0");
        assert_eq!(
            Run {
                len: 4,
                first: 4,
                ..r
            }
            .regs(4),
            "r1"
        );
        assert_eq!(
            Run {
                len: 8,
                first: 4,
                ..r
            }
            .regs(4),
            "r1–2"
        );
    }

    #[test]
    fn chunks_name_the_row_or_column_they_hold() {
        // 16-bit elements: row 0's k 0..7 in chunk 0, column 0's rows 0..7 in chunk 1.
        let mut e: Vec<[i64; 4]> = (0..8).map(|k| [2 * k, 0, 0, k]).collect();
        e.extend((1..8).map(|r| [16 + 2 * r, 0, r, 0]));
        e.push([16, 0, 0, 8]);
        let t = TileGrid::new("A", &e, 8, 16, 16);
        let ch = t.chunks();
        assert_eq!(
            ch[0],
            (
                0,
                ChunkHolds::Row {
                    row: 0,
                    first: 0,
                    last: 7
                }
            )
        );
        assert_eq!(ch[1], (1, ChunkHolds::Mixed { elements: 8 }));
        assert_eq!(t.per_chunk(), 8);
        assert_eq!(t.at(0, 8), Some(Place { byte: 16, bit: 0 }));
    }
}
