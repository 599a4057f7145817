// Where the quantization kernels' groups and scale bytes go: the scale layouts' offsets and
// the cut of the groups into CTA tiles (kernels/quant/quant.cu, which src/quant/cuda.rs puts
// after this file; src/quant/layout.rs is the host's side and tests the same arithmetic).

// NVFP4 blocks are one group (one thread), MXFP4 blocks two.
enum { MX = 0, NV = 1 };

// Threads per CTA of the quantization kernels (the host's THREADS, src/quant/cuda.rs).
#define QUANT_THREADS 256

// ---- where a block's scale byte goes (src/quant/layout.rs) ------------------------------------
//
// SCALE_LAYOUT is fixed per compiled module (src/quant/cuda.rs compiles one per layout, when a
// layout is first asked for), so the linear kernels carry none of the tiled arithmetic:
// 0 linear (byte = block index), 1 the 128x4 tiles of block-scaled GEMMs (cuBLAS, CUTLASS
// SM100, torchao to_blocked), 2 FlashInfer's 8x4 tiles. The kernels write the tiled layouts
// directly; padding bytes are never written (the host zeroes the buffer).
#ifndef SCALE_LAYOUT
#define SCALE_LAYOUT 0
#endif

// The scale grid: blocks a row (cols), the magic number and shift that divide by it
// (layout.rs: fast_div_magic), the bytes of one row of tiles, and the 64-block pieces of a row
// (hcount) with the magic number and shift that divide by their count (Tiling's bands), and
// the bands' walk the host chose with the grid (layout.rs: BandWalk; zero in row order): the
// tile count, the tiles between a CTA's consecutive tiles, the group index and scale byte
// offset that stride moves (wrapping, negative when the tiles are taken from the end), and the
// scale bytes (padding included), where a CTA's walk ends.
struct ScaleGeom {
    u32 cols, magic, shift, row_tile_bytes, hcount, hmagic, hshift;
    u32 tiles, stride, step_g, step_scale, scale_bytes;
};

// n / d for every n < 2^31 (Granlund-Montgomery; layout.rs: fast_div_magic): by cols, by hcount.
__device__ __forceinline__ u32 fast_div_by(u32 n, u32 magic, u32 shift) { return __umulhi(n << 1, magic) >> shift; }
__device__ __forceinline__ u32 fast_div(u32 n, const ScaleGeom& s) { return fast_div_by(n, s.magic, s.shift); }

// Byte offset of block b's scale (b = row * cols + col; layout.rs: ScaleGrid::offset), with
// the masks and shifts of the formula folded into multiplies (32-bit wrapping arithmetic, exact
// since the offset fits): with t = row / 128 and q = row % 128, 128x4's
// t·RT + (q % 32)·16 + (q / 32)·4 + (col / 4)·512 + col % 4 is
// t·(RT − 2048) + row·16 − ((row / 32) % 4)·508 + col·128 − (col % 4)·127, and 8x4's
// (row / 8)·RT + (row % 8)·4 + (col / 4)·32 + col % 4 is (row / 8)·(RT − 32) + row·4 + col·8 −
// (col % 4)·7. Multiplies run on the FMA pipe; the integer ALU is what limits these kernels.
__device__ __forceinline__ u32 scale_offset(u32 b, const ScaleGeom& s) {
    if (SCALE_LAYOUT == 0) return b;
    const u32 row = fast_div(b, s);
    const u32 col = b - row * s.cols;
    if (SCALE_LAYOUT == 1)
        return (row >> 7) * (s.row_tile_bytes - 2048u) + row * 16u - ((row >> 5) & 3u) * 508u + col * 128u -
               (col & 3u) * 127u;
    return (row >> 3) * (s.row_tile_bytes - 32u) + row * 4u + col * 8u - (col & 3u) * 7u;
}

// Where this thread's groups of one CTA tile are: the group index g (input and codes), whether
// it exists, and its scale's byte offset, for groups that hold the first lane of a block.
// Group indices are 32-bit (chunks < 2^32, so groups < 2^31 and every index computed here
// fits): one wide multiply-add makes an address, where 64-bit indices took a dozen
// instructions a tile.
struct GroupAt {
    u32 g;
    bool valid;
    u32 scale;
};

// Two ways of cutting the groups into CTA tiles.
// Row order (linear layout, MXFP4, and NV_BANDS=0): tile t holds groups t·TILE ... t·TILE +
// TILE - 1, group u of a thread being t·TILE + u·QUANT_THREADS + threadIdx.x; a tiled layout's
// scales of one row are then 4-byte pieces 512 (128x4) or 32 (8x4) bytes apart, and each
// offset takes a division by the row length.
// Bands (NVFP4 in 128x4 and 8x4, NV_BANDS=1): a CTA tile is the 8 rows whose scales share a
// 32-byte sector of a scale tile (128x4: rows 2k, 2k + 1, 2k + 32, ..., 2k + 97 of a tile row;
// 8x4: the tile row's 8 rows) over 64 blocks of the row, 16 scale tiles side by side. Warp w
// covers blocks 8w ... 8w + 7 (scale tiles 2w and 2w + 1) of the 8 rows: lane l block
// 8w + l mod 8 of row l / 8 of the band's first 4 rows (128x4: 2k + 32i; 8x4: i) in group 0
// and of the next 4 (128x4: 2k + 1 + 32i; 8x4: 4 + i) in group 1, whose scale bytes are the
// two 16-byte halves of the tiles' sectors: a load reads 4 rows × 256 bytes (bf16), and a
// warp's two scale stores fill two whole sectors. Warps of 8 rows × 4 blocks a load (one
// sector a store) ran 1-2 points of the copy slower, and a warp a row (1 KB a load; a store
// putting 4 bytes into each of 8 sectors) slower than both (reports/sm_90/quant/experiments/
// band-rows).
// Tile C is band C / H (H = ⌈cols / 64⌉, a run-time divisor: geom.hmagic, geom.hshift) and
// column range C mod H; a band is tile row b / 16 (128x4) and its sector b mod 16.
#ifndef NV_BANDS
#define NV_BANDS 1
#endif

template <int FMT, int UNROLL>
struct Tiling {
    static constexpr bool BANDS = NV_BANDS && SCALE_LAYOUT != 0 && FMT == NV && UNROLL == 2;
    static constexpr u32 TILE = QUANT_THREADS * UNROLL;
    static constexpr u32 BANDS_PER_TILE_ROW = SCALE_LAYOUT == 1 ? 16 : 1;
    static constexpr u32 TILE_ROWS = SCALE_LAYOUT == 1 ? 128 : 8;
    u32 groups, tiles;
    // The tile loop (quant.cu: tile_loop) takes a CTA's tiles blockIdx.x, + stride, + 2·stride,
    // ..., stepping from one tile's place to the next by fixed offsets (step): an add or two a
    // tile, where computing the place from the tile index took about forty instructions (the
    // divisions, and the thread's part from threadIdx.x). Row order: the stride is the grid.
    // Bands: it is the host's (ScaleGeom; the host launches a grid of the stride), a multiple
    // of one tile row's tiles (BANDS_PER_TILE_ROW·H), so a CTA's tiles share their band within
    // the tile row and their column range and lie whole tile rows apart.
    u32 stride, step_g;

    // `reverse`: the tiles are taken from the tensor's end (tile order tiles - 1 - tile).
    __device__ __forceinline__ Tiling(u32 groups_, const ScaleGeom& s, bool reverse) : groups(groups_) {
        if constexpr (BANDS) {
            // none of an empty tensor (a load clamped to the last group would have none)
            tiles = groups == 0 ? 0 : s.tiles;
            stride = s.stride;
            step_g = s.step_g;
        } else {
            tiles = groups / TILE + (groups % TILE != 0);
            stride = gridDim.x;
            step_g = reverse ? 0u - gridDim.x * TILE : gridDim.x * TILE;
        }
    }

    // This thread's place in a CTA tile: group 0's index (row order: the tile's first group
    // plus the thread's) and, bands, its scale byte offset and the blocks left in its row from
    // its block (signed). A group is there when its index is below the group count and, bands,
    // its block is inside the row (for such a block the index alone tells whether its row is).
    struct Where {
        u32 g, scale;
        int cols_left;
    };

    __device__ __forceinline__ Where where(u32 tile, const ScaleGeom& s) const {
        Where w;
        if constexpr (BANDS) {
            const u32 band = fast_div_by(tile, s.hmagic, s.hshift), h = tile - band * s.hcount;
            const u32 tile_row = band / BANDS_PER_TILE_ROW, sector = band % BANDS_PER_TILE_ROW;
            const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
            // group 0's row among the band's first 4, its block (Bands above)
            const u32 i = lane >> 3, q = SCALE_LAYOUT == 1 ? 32u * i : i;
            const u32 row = tile_row * TILE_ROWS + 2u * sector + q, col = h * 64u + warp * 8u + (lane & 7u);
            w.g = row * s.cols + col;
            w.scale = tile_row * s.row_tile_bytes + h * (16u * 4u * TILE_ROWS) +
                      (2u * warp + ((lane >> 2) & 1u)) * (4u * TILE_ROWS) + sector * 32u + 4u * i + (lane & 3u);
            w.cols_left = (int)s.cols - (int)col;
        } else {
            w.g = tile * TILE + threadIdx.x;
            w.scale = 0;
            w.cols_left = 0;
        }
        return w;
    }

    // The place in the tile `stride` tiles on from w's.
    __device__ __forceinline__ Where step(const Where& w, const ScaleGeom& s) const {
        return Where{w.g + step_g, w.scale + (BANDS ? s.step_scale : 0u), w.cols_left};
    }

    __device__ __forceinline__ GroupAt at(const Where& w, int u, const ScaleGeom& s) const {
        GroupAt a;
        if constexpr (BANDS) {
            // group u: the same block, u rows on (128x4) or 4u (8x4), 16u bytes on in the sector
            a.g = w.g + (u32)u * (SCALE_LAYOUT == 1 ? s.cols : 4u * s.cols);
            a.valid = a.g < groups && w.cols_left > 0;
            a.scale = w.scale + (u32)u * 16u;
        } else {
            a.g = w.g + (u32)u * QUANT_THREADS;
            a.valid = a.g < groups;
            a.scale = 0;
        }
        return a;
    }
};

// The UNROLL groups of this thread in a CTA tile, all loads issued before any value is used. A
// group that does not exist loads another instead (never stored, and no lane of another block
// reads its values): unconditional loads, where zeroing the registers first took a move per
// loaded word. Group 0 in general; the banded kernels of 16-bit inputs clamp the index to the
// last group (a group past the row's end and inside the tensor loads as it is): one
// instruction where a select of the index took three, its 64-bit product being selected. For
// f32 the clamp kept the group count live through the tile, 80 -> 86 registers (2 CTAs an SM).
template <class In, int FMT, int UNROLL>
__device__ __forceinline__ void load_tile(const void* x, const Tiling<FMT, UNROLL>& tl,
                                          const typename Tiling<FMT, UNROLL>::Where& w, const ScaleGeom& s,
                                          typename In::Raw (&raw)[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const GroupAt a = tl.at(w, u, s);
        if (Tiling<FMT, UNROLL>::BANDS && sizeof(typename In::Raw) == 32) {
            raw[u] = In::load(x, min(a.g, tl.groups - 1u));
        } else {
            raw[u] = In::load(x, a.valid ? a.g : 0u);
        }
    }
}
