//! The probe kernel of a TMA case: one warp copies the shared region in from global memory,
//! thread 0 issues one bulk tensor copy of the box (a load waits on an mbarrier for the
//! transaction bytes, a store on its bulk group), and the warp copies the region back out.
//!
//! Parameters: `p_map` (the 128-byte tensor map, in global memory: a generic address is one
//! of the places `cp.async.bulk.tensor` reads a map from), `p_in` (the region's words),
//! `p_out` (the region's words, then a status word: 1 done, 2 the mbarrier wait gave up).
//! The region starts at the case's offset from a 1024-byte-aligned base, the alignment the
//! swizzle pattern repeats at, so the XOR sees the address bits the case names.

use super::{Case, Dir};
use crate::isa::DEFAULT_PTX;

/// The kernel entry point's name.
pub const ENTRY: &str = "fp4probe_tma";
/// Status word values.
pub const STATUS_DONE: u32 = 1;
pub const STATUS_TIMED_OUT: u32 = 2;
/// mbarrier polls before the load gives up (a copy that never completes must not hang the
/// probe: it reports itself as timed out instead).
pub const WAIT_POLLS: u32 = 1 << 20;

/// Words of the kernel's output.
pub fn out_words(case: &Case) -> usize {
    (case.region_bytes() / 4) as usize + 1
}

/// The PTX module of `case`'s probe kernel (sm_90: the first target with bulk tensor copies).
pub fn probe_kernel(case: &Case) -> String {
    let (maj, min) = DEFAULT_PTX;
    let words = case.region_bytes() / 4;
    let (r0, c0) = case.origin();
    let copy = match case.dir {
        Dir::Load => format!(
            "    @%lead mbarrier.arrive.expect_tx.shared::cta.b64 %state, [%bar], {bytes};\n    \
@%lead cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%box], [%pm, {{%c0, %c1}}], [%bar];\n    \
mov.u32 %spin, 0;\n\
WAIT:\n    \
mbarrier.try_wait.parity.shared::cta.b64 %done, [%bar], 0;\n    \
@%done bra WAITED;\n    \
add.u32 %spin, %spin, 1;\n    \
setp.lt.u32 %more, %spin, {WAIT_POLLS};\n    \
@%more bra WAIT;\n\
WAITED:\n    \
selp.u32 %status, {STATUS_DONE}, {STATUS_TIMED_OUT}, %done;\n",
            bytes = case.box_bytes()
        ),
        Dir::Store => format!(
            "    @%lead cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%pm, {{%c0, %c1}}], [%box];\n    \
@%lead cp.async.bulk.commit_group;\n    \
@%lead cp.async.bulk.wait_group 0;\n    \
mov.u32 %status, {STATUS_DONE};\n"
        ),
    };
    let init = match case.dir {
        Dir::Load => {
            "    @%lead mbarrier.init.shared::cta.b64 [%bar], 1;\n    \
             fence.mbarrier_init.release.cluster;\n"
        }
        Dir::Store => "",
    };
    format!(
        "// fp4probe bulk tensor copy probe: {id}\n\
.version {maj}.{min}\n.target sm_90\n.address_size 64\n\n\
.visible .entry {ENTRY}(\n    .param .u64 p_map,\n    .param .u64 p_in,\n    .param .u64 p_out\n)\n{{\n    \
.shared .align 128 .b8 buf[{alloc}];\n    \
.shared .align 8 .b64 bar;\n    \
.reg .b32 %t, %base, %box, %bar, %i, %a, %w, %spin, %status, %c0, %c1;\n    \
.reg .b64 %pm, %pi, %po, %p, %off, %state;\n    \
.reg .pred %lead, %more, %done;\n    \
mov.u32 %t, %tid.x;\n    \
setp.eq.u32 %lead, %t, 0;\n    \
ld.param.u64 %pm, [p_map];\n    \
ld.param.u64 %pi, [p_in];\n    cvta.to.global.u64 %pi, %pi;\n    \
ld.param.u64 %po, [p_out];\n    cvta.to.global.u64 %po, %po;\n    \
// The 1024-byte-aligned base, and the box's address {offset} bytes past it.\n    \
mov.u64 %p, buf;\n    cvt.u32.u64 %base, %p;\n    \
add.u32 %base, %base, 1023;\n    and.b32 %base, %base, -1024;\n    \
add.u32 %box, %base, {offset};\n    \
mov.u64 %p, bar;\n    cvt.u32.u64 %bar, %p;\n    \
mov.u32 %c0, {c0};\n    mov.u32 %c1, {r0};\n    \
// The region in, one word per thread per step.\n    \
mov.u32 %i, %t;\n\
IN:\n    \
setp.lt.u32 %more, %i, {words};\n    @!%more bra IN_DONE;\n    \
mul.wide.u32 %off, %i, 4;\n    add.u64 %p, %pi, %off;\n    ld.global.u32 %w, [%p];\n    \
shl.b32 %a, %i, 2;\n    add.u32 %a, %a, %box;\n    st.shared.u32 [%a], %w;\n    \
add.u32 %i, %i, 32;\n    bra IN;\n\
IN_DONE:\n\
{init}    \
// The generic-proxy writes above, ordered before the copy's async-proxy accesses.\n    \
fence.proxy.async.shared::cta;\n    \
bar.sync 0;\n\
{copy}    \
bar.sync 0;\n    \
// The region out, then the status.\n    \
mov.u32 %i, %t;\n\
OUT:\n    \
setp.lt.u32 %more, %i, {words};\n    @!%more bra OUT_DONE;\n    \
shl.b32 %a, %i, 2;\n    add.u32 %a, %a, %box;\n    ld.shared.u32 %w, [%a];\n    \
mul.wide.u32 %off, %i, 4;\n    add.u64 %p, %po, %off;\n    st.global.u32 [%p], %w;\n    \
add.u32 %i, %i, 32;\n    bra OUT;\n\
OUT_DONE:\n    \
@%lead st.global.u32 [%po+{status_at}], %status;\n    \
ret;\n}}\n",
        id = case.id(),
        alloc = 1024 + case.smem_offset + case.region_bytes(),
        offset = case.smem_offset,
        status_at = 4 * words,
    )
}

/// The kernel entry point of the `stmatrix` + store path.
pub const STSM_ENTRY: &str = "fp4probe_tma_stsm";

/// The PTX module of the `stmatrix` + swizzled store path for store case `case`: one warp
/// clears the box, runs `v` (an x4 `stmatrix`) once per call of [`super::stsm::calls`] at the
/// byte offsets `p_addr[j][lane]` from the box's address with the registers
/// `p_src[j][lane][0..4]`, and thread 0 stores the box with the tensor map `p_map`.
pub fn stsm_kernel(case: &Case, v: &crate::isa::matrix::MatrixVariant) -> String {
    let (maj, min) = DEFAULT_PTX;
    let (r0, c0) = case.origin();
    let regs: Vec<String> = (0..4).map(|i| format!("%s{i}")).collect();
    format!(
        "// fp4probe stmatrix + bulk tensor store probe: {id}\n\
.version {maj}.{min}\n.target sm_90\n.address_size 64\n\n\
.visible .entry {STSM_ENTRY}(\n    .param .u64 p_map,\n    .param .u64 p_addr,\n    .param .u64 p_src\n)\n{{\n    \
.shared .align 128 .b8 buf[{alloc}];\n    \
.reg .b32 %t, %base, %i, %j, %a, %c0, %c1, %s0, %s1, %s2, %s3;\n    \
.reg .b64 %pm, %pa, %ps, %p, %off;\n    \
.reg .pred %lead, %more;\n    \
mov.u32 %t, %tid.x;\n    \
setp.eq.u32 %lead, %t, 0;\n    \
ld.param.u64 %pm, [p_map];\n    \
ld.param.u64 %pa, [p_addr];\n    cvta.to.global.u64 %pa, %pa;\n    \
ld.param.u64 %ps, [p_src];\n    cvta.to.global.u64 %ps, %ps;\n    \
mov.u64 %p, buf;\n    cvt.u32.u64 %base, %p;\n    \
add.u32 %base, %base, 1023;\n    and.b32 %base, %base, -1024;\n    \
mov.u32 %c0, {c0};\n    mov.u32 %c1, {r0};\n    \
// Clear the box, so an element no stmatrix wrote reads 0.\n    \
mov.u32 %i, %t;\n\
CLEAR:\n    \
setp.lt.u32 %more, %i, {words};\n    @!%more bra CLEARED;\n    \
shl.b32 %a, %i, 2;\n    add.u32 %a, %a, %base;\n    st.shared.u32 [%a], 0;\n    \
add.u32 %i, %i, 32;\n    bra CLEAR;\n\
CLEARED:\n    \
bar.sync 0;\n    \
mov.u32 %j, 0;\n\
CALL:\n    \
mad.lo.u32 %i, %j, 32, %t;\n    \
mul.wide.u32 %off, %i, 4;\n    add.u64 %p, %pa, %off;\n    ld.global.u32 %a, [%p];\n    \
add.u32 %a, %a, %base;\n    \
mul.wide.u32 %off, %i, 16;\n    add.u64 %p, %ps, %off;\n    \
ld.global.v4.u32 {{%s0, %s1, %s2, %s3}}, [%p];\n    \
{stsm}\n    \
add.u32 %j, %j, 1;\n    \
setp.lt.u32 %more, %j, {calls};\n    @%more bra CALL;\n    \
// The generic-proxy writes above, ordered before the store's async-proxy reads.\n    \
fence.proxy.async.shared::cta;\n    \
bar.sync 0;\n    \
@%lead cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%pm, {{%c0, %c1}}], [%base];\n    \
@%lead cp.async.bulk.commit_group;\n    \
@%lead cp.async.bulk.wait_group 0;\n    \
ret;\n}}\n",
        id = case.id(),
        alloc = 1024 + case.box_bytes(),
        words = case.box_bytes() / 4,
        calls = super::stsm::calls(case),
        stsm = v.instruction(&regs, "%a"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_name_their_copy_and_sizes() {
        let c: Case = "load.u16.128B.16x64.at256".parse().unwrap();
        let k = probe_kernel(&c);
        assert!(k.contains(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%box], \
             [%pm, {%c0, %c1}], [%bar];"
        ));
        assert!(k.contains("expect_tx.shared::cta.b64 %state, [%bar], 2048;"));
        assert!(k.contains("add.u32 %box, %base, 256;"));
        assert!(k.contains("mov.u32 %c0, 8;\n    mov.u32 %c1, 5;"));
        assert_eq!(out_words(&c), (2048 + 256) / 4 + 1);
        let s: Case = "store.u8.32B.16x32".parse().unwrap();
        let k = probe_kernel(&s);
        assert!(k.contains("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"));
        assert!(!k.contains("mbarrier"));
    }
}
