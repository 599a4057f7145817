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
// (hcount) with the magic number and shift that divide by their count (Tiling's bands).
struct ScaleGeom {
    u32 cols, magic, shift, row_tile_bytes, hcount, hmagic, hshift;
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
// 8x4: the tile row's 8 rows) over 64 blocks of the row, 16 scale tiles side by side: warp w's
// group u covers one scale tile (u·8 + w among the 16), lane l its byte k·32 + l, so every
// warp's scale store is one whole sector, and its loads are 8 rows of 4 consecutive groups.
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
    u32 groups, rows, tiles;
    // bands: this lane's row in the band and block in the 4 of a scale tile
    u32 q, c;

    __device__ __forceinline__ Tiling(u32 groups_, const ScaleGeom& s) : groups(groups_) {
        if constexpr (BANDS) {
            rows = fast_div(groups, s);
            const u32 lane = threadIdx.x & 31u;
            c = lane & 3u;
            q = SCALE_LAYOUT == 1 ? (lane >> 4) + ((lane >> 2) & 3u) * 32u : lane >> 2;
            const u32 bands = (rows + TILE_ROWS - 1) / TILE_ROWS * BANDS_PER_TILE_ROW;
            tiles = bands * s.hcount;
        } else {
            rows = 0, q = 0, c = 0;
            tiles = groups / TILE + (groups % TILE != 0);
        }
    }

    // Group u of this thread in CTA tile `tile`; `Where` holds what is per tile.
    struct Where {
        u32 base;
        u32 row0, col0, scale0;
    };

    __device__ __forceinline__ Where where(u32 tile, const ScaleGeom& s) const {
        Where w;
        if constexpr (BANDS) {
            const u32 band = fast_div_by(tile, s.hmagic, s.hshift), h = tile - band * s.hcount;
            const u32 tile_row = band / BANDS_PER_TILE_ROW, sector = band % BANDS_PER_TILE_ROW;
            w.row0 = tile_row * TILE_ROWS + 2u * sector + q;
            w.col0 = h * 64u + (threadIdx.x >> 5) * 4u + c;
            w.scale0 = tile_row * s.row_tile_bytes + h * (16u * 4u * TILE_ROWS) + (threadIdx.x >> 5) * (4u * TILE_ROWS) +
                       sector * 32u + (threadIdx.x & 31u);
            w.base = 0;
        } else {
            w.base = tile * TILE + threadIdx.x;
            w.row0 = w.col0 = w.scale0 = 0;
        }
        return w;
    }

    __device__ __forceinline__ GroupAt at(const Where& w, int u, const ScaleGeom& s) const {
        GroupAt a;
        if constexpr (BANDS) {
            // group u's scale tile is 8 tiles (32 blocks) to the right of group 0's
            const u32 col = w.col0 + (u32)u * 32u;
            a.valid = w.row0 < rows && col < s.cols;
            a.g = w.row0 * s.cols + col;
            a.scale = w.scale0 + (u32)u * (8u * 4u * TILE_ROWS);
        } else {
            a.g = w.base + (u32)u * QUANT_THREADS;
            a.valid = a.g < groups;
            a.scale = 0;
        }
        return a;
    }
};

// The UNROLL groups of this thread in a CTA tile, all loads issued before any value is used. A
// group that does not exist loads group 0 instead (never stored, and no lane of another block
// reads its values): unconditional loads, where zeroing the registers first took a move per
// loaded word.
template <class In, int FMT, int UNROLL>
__device__ __forceinline__ void load_tile(const void* x, const Tiling<FMT, UNROLL>& tl,
                                          const typename Tiling<FMT, UNROLL>::Where& w, const ScaleGeom& s,
                                          typename In::Raw (&raw)[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const GroupAt a = tl.at(w, u, s);
        raw[u] = In::load(x, a.valid ? a.g : 0u);
    }
}
