//! The probe kernel of a data-movement variant: one warp copies a 1 KiB tile from global memory
//! into shared memory, every lane takes its address (a byte offset into the tile) and its
//! source registers from global memory, runs the instruction once, and writes its destination
//! registers and then the whole tile back.
//!
//! Parameters: `p_addr` (32 words: each lane's byte offset), `p_tile` (256 words), `p_src`
//! (`[lane][reg]` source words), `p_out` (`[lane][reg]` destination words, then the tile's 256
//! words). Every global load comes before the instruction and every global store after it, so
//! the SASS listing's region between them holds the instruction's lowering.

use super::{LANES, TILE_ELEMS, dst_regs, src_regs};
use crate::isa::DEFAULT_PTX;
use crate::isa::matrix::{MatrixOp, MatrixVariant};
use std::fmt::Write;

/// The kernel entry point's name.
pub const ENTRY: &str = "fp4probe_matrix";

/// Words of the kernel's output.
pub fn out_words(v: &MatrixVariant) -> usize {
    (LANES * dst_regs(v)) as usize + TILE_ELEMS / 2
}

/// The PTX module of `v`'s probe kernel, for its minimum target.
pub fn probe_kernel(v: &MatrixVariant) -> String {
    let (ns, nd) = (src_regs(v), dst_regs(v));
    let regs = |p: &str, n: u32| (0..n).map(|i| format!("%{p}{i}")).collect::<Vec<_>>();
    let (src, dst) = (regs("s", ns), regs("d", nd));
    let mut decl = String::new();
    for list in [&src, &dst] {
        if !list.is_empty() {
            let _ = writeln!(decl, "    .reg .b32 {};", list.join(", "));
        }
    }
    let mut loads = String::new();
    for (i, r) in src.iter().enumerate() {
        let _ = writeln!(loads, "    ld.global.b32 {r}, [%ps+{}];", 4 * i);
    }
    let mut stores = String::new();
    for (i, r) in dst.iter().enumerate() {
        let _ = writeln!(stores, "    st.global.b32 [%po+{}], {r};", 4 * i);
    }
    let instruction = match v.op {
        MatrixOp::Ldmatrix => v.instruction(&dst, "%a"),
        MatrixOp::Stmatrix => v.instruction(&src, "%a"),
        MatrixOp::Movmatrix => v.instruction(&[dst[0].clone(), src[0].clone()], ""),
    };
    let (maj, min) = DEFAULT_PTX;
    let tile_out = 4 * LANES * nd;
    format!(
        "// fp4probe data-movement probe: {id}\n\
.version {maj}.{min}\n.target {target}\n.address_size 64\n\n\
.visible .entry {ENTRY}(\n    .param .u64 p_addr,\n    .param .u64 p_tile,\n    \
.param .u64 p_src,\n    .param .u64 p_out\n)\n{{\n    \
.shared .align 16 .b8 tile[{tile_bytes}];\n    \
.reg .b32 %lane, %base, %mine, %a, %w<8>;\n    .reg .b64 %pa, %pt, %ps, %po, %off, %p;\n{decl}    \
mov.u32 %lane, %tid.x;\n    \
ld.param.u64 %pa, [p_addr];\n    cvta.to.global.u64 %pa, %pa;\n    \
ld.param.u64 %pt, [p_tile];\n    cvta.to.global.u64 %pt, %pt;\n    \
ld.param.u64 %ps, [p_src];\n    cvta.to.global.u64 %ps, %ps;\n    \
ld.param.u64 %po, [p_out];\n    cvta.to.global.u64 %po, %po;\n    \
// The tile in: 32 bytes per lane.\n    \
mul.wide.u32 %off, %lane, 32;\n    add.u64 %p, %pt, %off;\n    \
ld.global.v4.b32 {{%w0, %w1, %w2, %w3}}, [%p];\n    \
ld.global.v4.b32 {{%w4, %w5, %w6, %w7}}, [%p+16];\n    \
// This lane's address and source registers.\n    \
mul.wide.u32 %off, %lane, 4;\n    add.u64 %p, %pa, %off;\n    ld.global.u32 %a, [%p];\n    \
mul.wide.u32 %off, %lane, {src_stride};\n    add.u64 %ps, %ps, %off;\n{loads}    \
mov.u64 %p, tile;\n    cvt.u32.u64 %base, %p;\n    mad.lo.u32 %mine, %lane, 32, %base;\n    \
st.shared.v4.b32 [%mine], {{%w0, %w1, %w2, %w3}};\n    \
st.shared.v4.b32 [%mine+16], {{%w4, %w5, %w6, %w7}};\n    \
add.u32 %a, %a, %base;\n    bar.sync 0;\n    \
{instruction}\n    bar.sync 0;\n    \
// Destination registers, then the tile out.\n    \
mul.wide.u32 %off, %lane, {dst_stride};\n    add.u64 %p, %po, %off;\n    mov.u64 %po, %p;\n\
{stores}    \
ld.shared.v4.b32 {{%w0, %w1, %w2, %w3}}, [%mine];\n    \
ld.shared.v4.b32 {{%w4, %w5, %w6, %w7}}, [%mine+16];\n    \
ld.param.u64 %p, [p_out];\n    cvta.to.global.u64 %p, %p;\n    \
mul.wide.u32 %off, %lane, 32;\n    add.u64 %p, %p, %off;\n    \
st.global.v4.b32 [%p+{tile_out}], {{%w0, %w1, %w2, %w3}};\n    \
st.global.v4.b32 [%p+{tile_out_hi}], {{%w4, %w5, %w6, %w7}};\n    \
ret;\n}}\n",
        id = v.id(),
        target = v.min_target,
        tile_bytes = 2 * TILE_ELEMS,
        src_stride = 4 * ns.max(1),
        dst_stride = 4 * nd.max(1),
        tile_out_hi = tile_out + 16,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::matrix::find;

    #[test]
    fn kernels_name_their_instruction_and_sizes() {
        let v = find("ldmatrix.m8n8.x4.trans.b16").unwrap();
        let k = probe_kernel(&v);
        assert!(k.contains(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 {%d0, %d1, %d2, %d3}, [%a];"
        ));
        assert!(k.contains(".target sm_75"));
        assert_eq!(out_words(&v), 128 + 256);
        let st = probe_kernel(&find("stmatrix.m8n8.x2.b16").unwrap());
        assert!(st.contains("stmatrix.sync.aligned.m8n8.x2.shared::cta.b16 [%a], {%s0, %s1};"));
        assert!(st.contains("ld.global.b32 %s1, [%ps+4];"));
        let mv = probe_kernel(&find("movmatrix.m8n8.trans.b16").unwrap());
        assert!(mv.contains("movmatrix.sync.aligned.m8n8.trans.b16 %d0, %s0;"));
    }
}
