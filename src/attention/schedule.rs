//! The wgmma kernel's stream-K schedule on the host (`kernels/attention/attn_stream_k.cuh`
//! states it; this is the same integer arithmetic): a persistent grid of CTAs shares the
//! launch's key tiles evenly. Without the causal mask the whole waves of row blocks are dealt
//! out round robin (the CTAs running at one time read the K and V of few heads), and with it,
//! where `with_pair_waves` asks, the whole waves of pairs of row blocks; the rest is cut evenly
//! into pieces, which the kernel adds up in a workspace. With the mask and `with_dynamic`, no
//! row block is cut: the CTAs draw them whole, longest first, from a counter as they go. The
//! host needs it for the grid size, the workspace, and the variant choice; its tests check that
//! every tile is run once and that the workspace slots of the pieces never collide.

use super::AttnShape;

/// Fewest key tiles a CTA is given: below it, a launch runs fewer CTAs than multiprocessors
/// (a CTA's start, and each cut row block's extra pass through the workspace, would cost more
/// than the tiles).
const MIN_TILES_PER_CTA: u64 = 4;

/// What a segment's start and end cost a CTA (its first S without P·V beside it, its last P·V
/// without S, O's store or the pieces' sum), in key tiles: an estimate from the H100's S = 1024
/// measurements, where a persistent grid of 23 tiles and about three segments a CTA ran 12-17%
/// slower than a grid of one CTA per row block (16 tiles, two waves).
const SEGMENT_COST_TILES: f64 = 4.0;

/// Warps of a consumer warpgroup; a cut row block's pieces are counted per warp.
const WARPS_PER_WARPGROUP: usize = 4;

/// `DYNAMIC_MIN_ITEMS_PER_CTA` of attn_stream_k.cuh (which says why): fewest row blocks a CTA
/// for the dynamic causal schedule.
pub const DYNAMIC_MIN_ITEMS_PER_CTA: usize = 4;

/// The dynamic schedule's two ticket counters (`u32`) after the per-row-block ones.
const TICKET_BYTES: usize = 8;

/// One launch's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamK {
    /// Query rows per row block (`BR`) and keys per tile (`BC`).
    pub rows_per_block: usize,
    pub keys_per_tile: usize,
    pub seq_q: usize,
    pub seq_k: usize,
    pub causal: bool,
    /// Heads (batch × heads).
    pub bh: usize,
    /// CTAs in the grid.
    pub ctas: usize,
    /// Causal pairs of row blocks dealt out whole in waves (`with_pair_waves`).
    pub pair_waves: bool,
    /// Causal row blocks drawn whole at run time (`with_dynamic`).
    pub dynamic: bool,
}

/// A CTA's share of one row block: key tiles `t0..t1` of its `tiles`; tile 0 is tile
/// `item_first` of the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub bh: usize,
    pub rb: usize,
    pub t0: u64,
    pub t1: u64,
    pub tiles: u64,
    pub item_first: u64,
}

impl Segment {
    pub fn whole(&self) -> bool {
        self.t0 == 0 && self.t1 == self.tiles
    }
}

impl StreamK {
    /// The persistent schedule of `shape` in blocks of `rows_per_block` rows and tiles of
    /// `keys_per_tile` keys on `sms` multiprocessors: one CTA each, or fewer where the launch
    /// has fewer than `MIN_TILES_PER_CTA` tiles a multiprocessor.
    pub fn persistent(
        shape: &AttnShape,
        rows_per_block: usize,
        keys_per_tile: usize,
        sms: usize,
    ) -> Self {
        let mut s = Self::grid(shape, rows_per_block, keys_per_tile);
        let wanted = s.total().div_ceil(MIN_TILES_PER_CTA);
        s.ctas = (sms.max(1) as u64).min(wanted).max(1) as usize;
        s
    }

    /// One CTA per row block, each run whole (the kernel's schedule with `ctas` = row blocks).
    pub fn grid(shape: &AttnShape, rows_per_block: usize, keys_per_tile: usize) -> Self {
        let mut s = StreamK {
            rows_per_block,
            keys_per_tile,
            seq_q: shape.seq_q,
            seq_k: shape.seq_k,
            causal: shape.causal,
            bh: shape.batch * shape.heads,
            ctas: 1,
            pair_waves: false,
            dynamic: false,
        };
        s.ctas = s.items();
        s
    }

    /// The faster of `persistent` and `grid` on `sms` multiprocessors, by `efficiency`.
    pub fn best(
        shape: &AttnShape,
        rows_per_block: usize,
        keys_per_tile: usize,
        sms: usize,
    ) -> Self {
        let p = Self::persistent(shape, rows_per_block, keys_per_tile, sms);
        let g = Self::grid(shape, rows_per_block, keys_per_tile);
        if g.efficiency(sms) > p.efficiency(sms) {
            g
        } else {
            p
        }
    }

    /// With `on` (the FP8 body's `ATTN_CAUSAL_PAIR_WAVES`), a persistent causal schedule whose
    /// pairs of row blocks all have the same tiles deals its first whole waves of pairs out
    /// round robin, head-major (`Schedule::init` in attn_stream_k.cuh), so the CTAs running
    /// at one time hold few heads, whose K and V stay in L2; other schedules are returned as
    /// they are.
    pub fn with_pair_waves(mut self, on: bool) -> Self {
        self.pair_waves = on && self.causal && self.ctas != self.items() && self.uniform_pairs();
        self
    }

    /// With `on` (the FP8 body's `ATTN_CAUSAL_DYNAMIC`), a persistent causal schedule whose
    /// pairs are not dealt in waves and which has at least `DYNAMIC_MIN_ITEMS_PER_CTA` row
    /// blocks a CTA runs them whole: CTA g row block g of `whole_item`'s order (the longest of
    /// every head first), then each CTA the next one of that order left, drawn from a counter
    /// as it starts a segment (`Schedule::next` in attn_stream_k.cuh, the draw in
    /// attn_wgmma_fp8.cuh's producer). Which CTA runs which row block then depends on the run;
    /// `segments` gives only the first. Other schedules are returned as they are.
    pub fn with_dynamic(mut self, on: bool) -> Self {
        self.dynamic = on
            && self.causal
            && self.ctas != self.items()
            && !self.pair_waves
            && self.items() >= DYNAMIC_MIN_ITEMS_PER_CTA * self.ctas;
        self
    }

    /// Tiles of a causal pair (row blocks p and R-1-p), and whether every pair has as many.
    fn pair_tiles(&self) -> u64 {
        self.row_block_tiles(0) + self.row_block_tiles(self.row_blocks() - 1)
    }

    fn uniform_pairs(&self) -> bool {
        let r = self.row_blocks();
        r.is_multiple_of(2)
            && (1..r / 2).all(|p| {
                self.row_block_tiles(p) + self.row_block_tiles(r - 1 - p) == self.pair_tiles()
            })
    }

    /// Row blocks of all heads.
    pub fn items(&self) -> usize {
        self.row_blocks() * self.bh
    }

    pub fn row_blocks(&self) -> usize {
        self.seq_q.div_ceil(self.rows_per_block)
    }

    /// Key tiles of row block `rb` (`row_block_key_end` in attn_common.cuh).
    pub fn row_block_tiles(&self, rb: usize) -> u64 {
        let q_last = ((rb + 1) * self.rows_per_block).min(self.seq_q) - 1;
        let key_end = if self.causal {
            self.seq_k.min(q_last + 1)
        } else {
            self.seq_k
        };
        key_end.div_ceil(self.keys_per_tile) as u64
    }

    /// The row block at place `p` of a head's order in the tail (`rb_at` in attn_stream_k.cuh):
    /// with the causal mask pairs of the shortest and the longest left (0, R-1, 1, R-2, ...),
    /// so that every CTA's range holds about as many segments as any other's; without it `p`.
    pub fn rb_at(&self, p: usize) -> usize {
        if !self.causal {
            p
        } else if p.is_multiple_of(2) {
            p / 2
        } else {
            self.row_blocks() - 1 - p / 2
        }
    }

    /// The place of row block `rb` in its head's order (`rb_at`'s inverse).
    fn place_of(&self, rb: usize) -> usize {
        (0..self.row_blocks())
            .position(|p| self.rb_at(p) == rb)
            .expect("rb_at is a permutation of the row blocks")
    }

    pub fn head_tiles(&self) -> u64 {
        (0..self.row_blocks())
            .map(|rb| self.row_block_tiles(rb))
            .sum()
    }

    pub fn total(&self) -> u64 {
        self.head_tiles() * self.bh as u64
    }

    /// Row blocks dealt out whole: all of them with a grid of one CTA each or the dynamic
    /// schedule, else (round robin) the whole waves of them without the causal mask (every row
    /// block then has the same tiles) or of their pairs with `pair_waves`, none with the mask
    /// otherwise.
    pub fn whole_items(&self) -> u64 {
        let items = self.items();
        if self.ctas == items || self.dynamic {
            items as u64
        } else if self.pair_waves {
            (items / 2 / self.ctas * self.ctas * 2) as u64
        } else if self.causal {
            0
        } else {
            (items / self.ctas * self.ctas) as u64
        }
    }

    /// The (head, row block) of the k-th row block dealt out whole (`Schedule::whole_item` in
    /// attn_stream_k.cuh). Without the mask head-major, rb = k % R (not rb_at's order: only the
    /// tail is cut, and only its order balances segments). With it in a grid of one CTA per
    /// row block or the dynamic schedule, the longest row blocks of all heads first, so that
    /// the CTAs the hardware starts (or the items drawn) last are the short ones. With
    /// `pair_waves` head-major in `rb_at`'s order (items 2u and 2u + 1 are pair u).
    pub fn whole_item(&self, k: u64) -> (usize, usize) {
        let r = self.row_blocks() as u64;
        if self.pair_waves {
            ((k / r) as usize, self.rb_at((k % r) as usize))
        } else if self.causal {
            let bh = self.bh as u64;
            ((k % bh) as usize, self.row_blocks() - 1 - (k / bh) as usize)
        } else {
            ((k / r) as usize, (k % r) as usize)
        }
    }

    /// The first tile of the tail, which the CTAs cut evenly.
    fn tail0(&self) -> u64 {
        if self.whole_items() == self.items() as u64 {
            self.total()
        } else if self.pair_waves {
            self.whole_items() / 2 * self.pair_tiles()
        } else {
            self.whole_items() * self.row_block_tiles(0)
        }
    }

    /// The whole row blocks CTA `g` runs, in order (`Schedule::next`): items g, g + ctas, ...;
    /// with `pair_waves` pairs g, g + ctas, ..., each its two row blocks; in the dynamic
    /// schedule item g, the first (the rest are drawn at run time).
    pub fn whole_items_of(&self, g: usize) -> Vec<u64> {
        if self.dynamic {
            (g as u64..self.whole_items()).take(1).collect()
        } else if self.pair_waves {
            (g as u64..self.whole_items() / 2)
                .step_by(self.ctas)
                .flat_map(|u| [2 * u, 2 * u + 1])
                .collect()
        } else {
            (g as u64..self.whole_items()).step_by(self.ctas).collect()
        }
    }

    /// Tile 0 of the row block at place `pos` of head `bh` in the launch's order.
    fn item_first(&self, bh: usize, pos: usize) -> u64 {
        bh as u64 * self.head_tiles()
            + (0..pos)
                .map(|p| self.row_block_tiles(self.rb_at(p)))
                .sum::<u64>()
    }

    /// The first tile of CTA `g`'s tail range (`g = ctas`: the tail's end).
    pub fn cta_start(&self, g: usize) -> u64 {
        self.tail0() + g as u64 * (self.total() - self.tail0()) / self.ctas as u64
    }

    /// The CTA whose tail range holds tile `s`.
    pub fn owner(&self, s: u64) -> usize {
        let len = self.total() - self.tail0();
        (((s - self.tail0() + 1) * self.ctas as u64 - 1) / len) as usize
    }

    /// The segments of CTA `g`, in order: its whole row blocks, then its tail range.
    pub fn segments(&self, g: usize) -> Vec<Segment> {
        // (The kernel leaves item_first 0 for whole row blocks: only cut ones need it.)
        let mut out: Vec<Segment> = self
            .whole_items_of(g)
            .into_iter()
            .map(|k| {
                let (bh, rb) = self.whole_item(k);
                let tiles = self.row_block_tiles(rb);
                Segment {
                    bh,
                    rb,
                    t0: 0,
                    t1: tiles,
                    tiles,
                    item_first: self.item_first(bh, self.place_of(rb)),
                }
            })
            .collect();
        let (mut s, end) = (self.cta_start(g), self.cta_start(g + 1));
        let head = self.head_tiles();
        while s < end {
            let bh = (s / head) as usize;
            let (mut r, mut pos) = (s - bh as u64 * head, 0);
            while r >= self.row_block_tiles(self.rb_at(pos)) {
                r -= self.row_block_tiles(self.rb_at(pos));
                pos += 1;
            }
            let rb = self.rb_at(pos);
            let tiles = self.row_block_tiles(rb);
            let t1 = tiles.min(r + (end - s));
            out.push(Segment {
                bh,
                rb,
                t0: r,
                t1,
                tiles,
                item_first: s - r,
            });
            s += t1 - r;
        }
        out
    }

    /// The workspace slot (0 or 1) of CTA `g`'s piece of the row block whose tile 0 is tile
    /// `item_first`: 0 for the first segment of g's tail range, 1 for its last.
    pub fn slot(&self, g: usize, item_first: u64) -> usize {
        usize::from(self.cta_start(g) < item_first)
    }

    /// Per-row-block counters of the pieces ended (`u32`, per warp of each consumer
    /// warpgroup: `finish_split` in attn_wgmma.cuh), then the dynamic schedule's two ticket
    /// counters (`Schedule::tickets`), all of which the kernel leaves at 0.
    pub fn counter_bytes(&self, consumers: usize) -> usize {
        self.row_blocks() * self.bh * consumers * WARPS_PER_WARPGROUP * 4 + TICKET_BYTES
    }

    /// The pieces' partial results: per CTA two slots, per consumer warpgroup 128 threads ×
    /// (head_dim / 2 O registers, two row maxima, two row sums) f32 (`Partial<D>` in
    /// attn_wgmma.cuh).
    pub fn partial_bytes(&self, consumers: usize, head_dim: usize) -> usize {
        self.ctas * 2 * consumers * 128 * (head_dim / 2 + 4) * 4
    }

    /// The share of `sms` multiprocessors' time that is work, with `SEGMENT_COST_TILES` a
    /// segment: for a grid of one CTA per row block, hardware waves of `sms` CTAs (row blocks
    /// of the mean length); for a persistent grid, the CTA with the most tiles and its
    /// segments (its whole row blocks, and a tail range of the mean length in two pieces); for
    /// the dynamic schedule, `dynamic_loads`' busiest CTA.
    pub fn efficiency(&self, sms: usize) -> f64 {
        let sms = sms.max(1);
        let total = self.total() as f64;
        let mean = total / self.items() as f64;
        let time = if self.ctas == self.items() {
            self.items().div_ceil(sms) as f64 * (mean + SEGMENT_COST_TILES)
        } else if self.dynamic {
            self.dynamic_loads().into_iter().fold(0.0, f64::max)
        } else {
            let whole = self.whole_items() / self.ctas as u64;
            let tail = (self.total() - self.tail0()).div_ceil(self.ctas as u64);
            let tail_segments = if tail == 0 {
                0.0
            } else {
                1.0 + tail as f64 / mean
            };
            let tiles = whole as f64 * mean + tail as f64;
            tiles + (whole as f64 + tail_segments) * SEGMENT_COST_TILES
        };
        total / (sms as f64 * time)
    }

    /// Each CTA's time in key tiles (`SEGMENT_COST_TILES` a row block) if the CTAs ran in
    /// lockstep from one start: the dynamic schedule in that model, each row block drawn by the
    /// CTA that is free first (the lowest-numbered of equals).
    pub fn dynamic_loads(&self) -> Vec<f64> {
        use std::cmp::Reverse;
        let cost = |k: u64| self.row_block_tiles(self.whole_item(k).1) as f64 + SEGMENT_COST_TILES;
        let mut loads: Vec<f64> = (0..self.ctas as u64).map(cost).collect();
        // (Loads are positive, so their bit patterns order as their values.)
        let mut free: std::collections::BinaryHeap<Reverse<(u64, usize)>> = loads
            .iter()
            .enumerate()
            .map(|(g, l)| Reverse((l.to_bits(), g)))
            .collect();
        for k in self.ctas as u64..self.items() as u64 {
            let Reverse((_, g)) = free.pop().expect("at least one CTA");
            loads[g] += cost(k);
            free.push(Reverse((loads[g].to_bits(), g)));
        }
        loads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seq_q: usize, seq_k: usize, heads: usize, causal: bool) -> AttnShape {
        AttnShape::new(1, heads, seq_q, seq_k, 128, causal).unwrap()
    }

    /// The fewest and the most key tiles a CTA of `s` runs.
    fn tile_share_range(s: &StreamK) -> (u64, u64) {
        let shares = (0..s.ctas).map(|g| s.segments(g).iter().map(|sg| sg.t1 - sg.t0).sum::<u64>());
        (shares.clone().min().unwrap_or(0), shares.max().unwrap_or(0))
    }

    /// Every tile of every row block is in exactly one segment; the whole row blocks come
    /// first, round robin; the tail segments of a CTA are contiguous and in order; every cut
    /// row block's pieces are consecutive CTAs from owner(first tile) to owner(last tile); no
    /// two pieces share a workspace slot; the CTAs' tiles differ by one at most.
    fn check(s: &StreamK) {
        let mut covered = vec![0u32; s.total() as usize];
        let mut slots = std::collections::HashSet::new();
        let mut expected_next = s.tail0();
        let mut most = (u64::MAX, 0);
        for g in 0..s.ctas {
            let segs = s.segments(g);
            let whole = s.whole_items_of(g);
            let tail = &segs[whole.len()..];
            let mut tiles = 0;
            for (i, (sg, &k)) in segs.iter().zip(&whole).enumerate() {
                assert!(sg.whole(), "{s:?}: CTA {g} segment {i}");
                assert_eq!((sg.bh, sg.rb), s.whole_item(k));
                let round = if s.pair_waves { 2 * s.ctas } else { s.ctas };
                assert_eq!(k as usize % round / (round / s.ctas), g, "{s:?}: item {k}");
            }
            for (i, sg) in tail.iter().enumerate() {
                let first = sg.item_first + sg.t0;
                assert_eq!(first, expected_next, "{s:?}: CTA {g} tail segment {i}");
                expected_next = sg.item_first + sg.t1;
                for t in first..sg.item_first + sg.t1 {
                    assert_eq!(s.owner(t), g, "{s:?}: tile {t}");
                }
                if !sg.whole() {
                    let slot = s.slot(g, sg.item_first);
                    // A cut row block's piece is the first or the last segment of the range.
                    assert!(
                        (slot == 0 && i == 0) || (slot == 1 && i == tail.len() - 1),
                        "{s:?}: CTA {g} tail segment {i} of {} in slot {slot}",
                        tail.len()
                    );
                    assert!(slots.insert((g, slot)), "{s:?}: slot ({g}, {slot}) twice");
                    let (g0, g1) = (
                        s.owner(sg.item_first),
                        s.owner(sg.item_first + sg.tiles - 1),
                    );
                    assert!(g0 <= g && g <= g1 && g0 < g1, "{s:?}: pieces {g0}..={g1}");
                }
            }
            for sg in &segs {
                assert_eq!(sg.tiles, s.row_block_tiles(sg.rb));
                let first = sg.item_first + sg.t0;
                for t in first..sg.item_first + sg.t1 {
                    covered[t as usize] += 1;
                }
                tiles += sg.t1 - sg.t0;
            }
            assert!(tiles > 0, "{s:?}: CTA {g} has no tiles");
            most = (most.0.min(tiles), most.1.max(tiles));
        }
        assert_eq!(
            expected_next,
            s.total(),
            "{s:?}: the tail ends at the last tile"
        );
        assert!(
            covered.iter().all(|&c| c == 1),
            "{s:?}: a tile not covered once"
        );
        if s.ctas != s.items() {
            assert!(most.1 - most.0 <= 1, "{s:?}: CTAs run {most:?} tiles");
        }
    }

    /// A schedule `with_dynamic` left static is `check`ed; a dynamic one deals every row block
    /// whole once, longest first, CTA g starting at row block g, and its lockstep loads differ
    /// by at most one row block's cost.
    fn check_dynamic(s: &StreamK) {
        if !s.dynamic {
            check(s);
            return;
        }
        assert!(s.causal && !s.pair_waves && s.items() >= DYNAMIC_MIN_ITEMS_PER_CTA * s.ctas);
        assert_eq!(s.whole_items(), s.items() as u64);
        let order: Vec<(usize, usize)> = (0..s.items() as u64).map(|k| s.whole_item(k)).collect();
        assert!(
            order
                .windows(2)
                .all(|w| s.row_block_tiles(w[0].1) >= s.row_block_tiles(w[1].1)),
            "{s:?}: a longer row block after a shorter one"
        );
        let mut sorted = order.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), s.items(), "{s:?}: a row block twice");
        for (g, &first) in order.iter().enumerate().take(s.ctas) {
            let segs = s.segments(g);
            assert_eq!(segs.len(), 1, "{s:?}: CTA {g}");
            assert!(segs[0].whole() && (segs[0].bh, segs[0].rb) == first);
        }
        let loads = s.dynamic_loads();
        let spread = loads.iter().fold(0.0, |a: f64, &l| a.max(l))
            - loads.iter().fold(f64::MAX, |a, &l| a.min(l));
        let longest = s.row_block_tiles(s.row_blocks() - 1) as f64 + SEGMENT_COST_TILES;
        assert!(spread <= longest, "{s:?}: loads {spread} apart");
    }

    #[test]
    fn ranges_cover_every_tile_once_and_pieces_keep_apart() {
        for (sq, sk, heads, causal) in [
            (4096, 4096, 32, false),
            (4096, 4096, 32, true),
            (1024, 1024, 32, true),
            (77, 133, 1, true),
            (250, 333, 3, false),
            (1000, 17, 2, true),
            (17, 1000, 5, true),
            (1500, 700, 7, true),
            (1024, 512, 2, true),
            (192, 192, 1, false),
            (64, 64, 1, false),
            (2048, 2048, 3, true),
            (1536, 1536, 32, true),
            (768, 768, 5, true),
        ] {
            for (br, bc) in [(192, 64), (128, 64), (192, 128)] {
                for sms in [1, 7, 132] {
                    let s = StreamK::persistent(&shape(sq, sk, heads, causal), br, bc, sms);
                    check(&s);
                    check(&s.with_pair_waves(true));
                    check_dynamic(&s.with_dynamic(true));
                }
                check(&StreamK::grid(&shape(sq, sk, heads, causal), br, bc));
            }
        }
    }

    #[test]
    fn the_benchmark_grid_is_one_cta_a_multiprocessor_and_balanced() {
        // S = 4096, H = 32, 192 rows, 64 keys: 22 row blocks of 64 tiles a head (the last of 64
        // rows), 45056 tiles, 341 or 342 a CTA on 132 SMs (a grid of one CTA per row block ran
        // 704 CTAs, 5.3 waves).
        let s = StreamK::persistent(&shape(4096, 4096, 32, false), 192, 64, 132);
        assert_eq!(
            (s.row_blocks(), s.row_block_tiles(0), s.total()),
            (22, 64, 45056)
        );
        assert_eq!(s.ctas, 132);
        assert_eq!(tile_share_range(&s), (341, 342));
        // Five whole waves round robin, the last 44 row blocks cut in three pieces each.
        assert_eq!(s.whole_items(), 660);
        let segs = s.segments(0);
        assert_eq!(segs.len(), 6);
        assert_eq!((segs[5].t0, segs[5].t1), (0, 21));
        // With the mask every row block is in the tail.
        assert_eq!(
            StreamK::persistent(&shape(4096, 4096, 32, true), 192, 64, 132).whole_items(),
            0
        );
        // Causal: row block rb has 3·(rb + 1) tiles (the last one 64).
        let c = StreamK::persistent(&shape(4096, 4096, 32, true), 192, 64, 132);
        assert_eq!(c.row_block_tiles(0), 3);
        assert_eq!(c.row_block_tiles(20), 63);
        assert_eq!(c.row_block_tiles(21), 64);
        assert_eq!(c.head_tiles(), 3 * (1..=21).sum::<u64>() + 64);
        // The mode each benchmark shape runs (64 keys, 132 SMs): persistent where the grid's
        // last wave would be partly idle, a grid of one CTA per row block at S = 1024 with the
        // 128-row blocks it runs (two full short waves, where cutting cost more than it saved:
        // measured).
        let best = |seq, causal, rows| StreamK::best(&shape(seq, seq, 32, causal), rows, 64, 132);
        assert_eq!(best(4096, false, 192).ctas, 132);
        assert_eq!(best(4096, true, 192).ctas, 132);
        assert_eq!(best(16384, false, 192).ctas, 132);
        assert_eq!(best(1024, false, 128).ctas, 8 * 32);
        assert_eq!(best(1024, true, 128).ctas, 8 * 32);
        // A small launch runs fewer CTAs, each at least MIN_TILES_PER_CTA tiles.
        let small = StreamK::persistent(&shape(256, 256, 1, false), 192, 64, 132);
        assert_eq!((small.total(), small.ctas), (8, 2));
    }

    #[test]
    fn a_causal_grid_of_one_cta_per_row_block_starts_the_longest_first() {
        // S = 1024, H = 32, 128 rows and keys: the FP8 kernel's grid mode (row block rb has
        // rb + 1 tiles). CTA k runs one row block; lengths never grow with k, every (head, row
        // block) once.
        let s = StreamK::grid(&shape(1024, 1024, 32, true), 128, 128);
        assert_eq!((s.ctas, s.whole_items()), (256, 256));
        let runs: Vec<(usize, usize)> = (0..s.ctas)
            .map(|g| (s.segments(g)[0].bh, s.segments(g)[0].rb))
            .collect();
        assert!(
            runs.windows(2)
                .all(|w| s.row_block_tiles(w[0].1) >= s.row_block_tiles(w[1].1))
        );
        assert!(runs[..32].iter().all(|&(_, rb)| rb == 7));
        let mut sorted = runs.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..32)
                .flat_map(|bh| (0..8).map(move |rb| (bh, rb)))
                .collect::<Vec<_>>()
        );
        check(&s);
    }

    #[test]
    fn causal_row_blocks_pair_the_shortest_with_the_longest() {
        for rbs in 1..=40usize {
            let s = StreamK::persistent(&shape(128 * rbs, 128 * rbs, 1, true), 128, 128, 132);
            let mut order: Vec<usize> = (0..rbs).map(|p| s.rb_at(p)).collect();
            if rbs >= 2 {
                assert_eq!(&order[..2], &[0, rbs - 1], "{rbs} row blocks");
            }
            order.sort_unstable();
            assert_eq!(order, (0..rbs).collect::<Vec<_>>(), "{rbs} row blocks");
            assert_eq!(s.place_of(rbs - 1), usize::from(rbs > 1));
        }
        // The FP8 kernel's causal benchmark shape (S = 4096, H = 32, 128 rows, 128 keys: row
        // block rb has rb + 1 tiles): every CTA runs 128 tiles in 8 or 9 segments; in the order
        // 0, 1, ..., R-1 the ranges over short row blocks hold up to 16.
        let s = StreamK::persistent(&shape(4096, 4096, 32, true), 128, 128, 132);
        let segments: Vec<usize> = (0..132).map(|g| s.segments(g).len()).collect();
        assert_eq!(s.total(), 32 * (1..=32).sum::<u64>());
        assert_eq!(
            (segments.iter().min(), segments.iter().max()),
            (Some(&8), Some(&9))
        );
        // Without the mask the order is the row blocks'.
        let plain = StreamK::persistent(&shape(4096, 4096, 32, false), 128, 128, 132);
        assert!((0..32).all(|p| plain.rb_at(p) == p));
    }

    #[test]
    fn pair_waves_deal_whole_pairs_head_major_then_cut_the_rest() {
        // The FP8 kernel's causal benchmark shape: 16 pairs of 33 tiles a head, 512 pairs on
        // 132 CTAs: three whole waves (pairs g, g + 132, g + 264), the last 116 pairs cut.
        let s =
            StreamK::persistent(&shape(4096, 4096, 32, true), 128, 128, 132).with_pair_waves(true);
        assert!(s.pair_waves);
        assert_eq!((s.whole_items(), s.tail0()), (2 * 396, 396 * 33));
        let segs = s.segments(5);
        let rows: Vec<(usize, usize)> = segs[..6].iter().map(|sg| (sg.bh, sg.rb)).collect();
        // Pair 5 is head 0's row blocks 5 and 26; pair 137 head 8's 9 and 22; 269 head 16's 13, 18.
        assert_eq!(rows, [(0, 5), (0, 26), (8, 9), (8, 22), (16, 13), (16, 18)]);
        // The CTAs of a wave hold 8 or 9 heads (pairs 0..131: head 8's fourth pair the last).
        assert!(segs[6..].iter().all(|sg| sg.bh >= 24));
        assert_eq!(s.whole_item(2 * 131), (8, 3));
        assert_eq!(tile_share_range(&s), (128, 128));
        check(&s);
        // Pairs of unequal tiles (S = 4096 in 192-row blocks: the last one 64 rows), a grid of
        // one CTA per row block, and no whole wave leave the schedule as it is, its CTAs
        // starting anywhere.
        let uneven = StreamK::persistent(&shape(4096, 4096, 32, true), 192, 64, 132);
        assert!(!uneven.with_pair_waves(true).pair_waves);
        let grid = StreamK::grid(&shape(1024, 1024, 32, true), 128, 128).with_pair_waves(true);
        assert!(!grid.pair_waves);
        let few =
            StreamK::persistent(&shape(512, 512, 2, true), 128, 128, 132).with_pair_waves(true);
        assert_eq!(few.whole_items(), 0);
    }

    #[test]
    fn the_causal_benchmark_shape_draws_its_row_blocks_whole() {
        // The FP8 kernel's causal shape (S = 4096, H = 32, 128 rows and keys): 1024 row blocks
        // of 1..=32 tiles on 132 CTAs, drawn whole, longest first: the first wave rows 31 to
        // 28 of every head and four of row 27.
        let cut = StreamK::persistent(&shape(4096, 4096, 32, true), 128, 128, 132);
        let s = cut.with_dynamic(true);
        assert!(s.dynamic);
        check_dynamic(&s);
        assert_eq!(s.segments(131)[0].rb, 27);
        assert_eq!(s.segments(127)[0].rb, 28);
        // In the lockstep model (a row block's start and end as SEGMENT_COST_TILES tiles) the
        // busiest CTA takes 161 tiles' time, the cut schedule's 164 (128 tiles, 9 segments).
        assert_eq!(s.dynamic_loads().into_iter().fold(0.0, f64::max), 161.0);
        assert!(s.efficiency(132) > cut.efficiency(132));
        // Waves of pairs, a grid of one CTA per row block, no mask, too few row blocks a CTA
        // (S = 2048: 512 on 132), and the schedule asked for static keep their schedule.
        let waves = StreamK::persistent(&shape(16384, 16384, 32, true), 128, 128, 132)
            .with_pair_waves(true);
        assert!(waves.pair_waves && !waves.with_dynamic(true).dynamic);
        assert!(
            !StreamK::grid(&shape(1024, 1024, 32, true), 128, 128)
                .with_dynamic(true)
                .dynamic
        );
        assert!(
            !StreamK::persistent(&shape(4096, 4096, 32, false), 128, 128, 132)
                .with_dynamic(true)
                .dynamic
        );
        assert!(
            !StreamK::persistent(&shape(2048, 2048, 32, true), 128, 128, 132)
                .with_dynamic(true)
                .dynamic
        );
        assert!(!cut.with_dynamic(false).dynamic);
        let source = include_str!("../../kernels/attention/attn_stream_k.cuh");
        assert!(
            source.contains("constexpr u64 DYNAMIC_MIN_ITEMS_PER_CTA = 4;")
                && DYNAMIC_MIN_ITEMS_PER_CTA == 4,
            "the host's bound differs from the kernel's"
        );
    }

    #[test]
    fn workspace_sizes_follow_the_kernels_layout() {
        let s = StreamK::persistent(&shape(4096, 4096, 32, false), 192, 64, 132);
        // The pieces' counters, per row block and warp, then the two tickets, where the FP8
        // body finds them.
        assert_eq!(s.counter_bytes(3), 22 * 32 * 3 * 4 * 4 + 8);
        let fp8 = include_str!("../../kernels/attention/attn_wgmma_fp8.cuh");
        assert!(fp8.contains("counters + (u64)((Sq + BR - 1) / BR) * bh_count * CONSUMERS * 4"));
        assert_eq!(s.partial_bytes(3, 128), 132 * 2 * 3 * 128 * 68 * 4);
    }
}
