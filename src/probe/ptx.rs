//! PTX text of the probe kernels, filled in from the templates in `probes/`.

use crate::isa::{Operand, OperandRegs, ScaleSelectors, Target, Variant};
use std::fmt::Write;

const FRAGMENT_TEMPLATE: &str = include_str!("../../probes/fragment.ptx");

/// The kernel entry point's name.
pub const FRAGMENT_ENTRY: &str = "fp4probe_fragment";

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("%{prefix}{i}")).collect()
}

/// The fragment-probe kernel for `v` compiled for `target` with the given scale selectors (and
/// sparsity selector 0 for `mma.sp`).
pub fn fragment_kernel(v: &Variant, target: Target, sel: ScaleSelectors) -> String {
    sparse_fragment_kernel(v, target, sel, 0)
}

/// The fragment-probe kernel with sparsity selector `sparsity` (ignored for dense variants): an
/// `mma.sp` kernel takes one more pointer, each lane's metadata word, before D.
pub fn sparse_fragment_kernel(
    v: &Variant,
    target: Target,
    sel: ScaleSelectors,
    sparsity: u32,
) -> String {
    let mut regs = OperandRegs {
        a: names("a", v.fragment(Operand::A).regs),
        b: names("b", v.fragment(Operand::B).regs),
        c: names("c", v.fragment(Operand::C).regs),
        d: names("d", v.fragment(Operand::D).regs),
        ..Default::default()
    };
    let mut decls = String::new();
    for (op, list) in [
        (Operand::A, &regs.a),
        (Operand::B, &regs.b),
        (Operand::C, &regs.c),
        (Operand::D, &regs.d),
    ] {
        writeln!(decls, "    .reg .{} {};", v.reg_type(op), list.join(", ")).unwrap();
    }
    let mut loads = String::new();
    let mut load_block = |param: &str, op_regs: &[String], ty: &str, reg_bytes: u32| {
        let lane_bytes = op_regs.len() as u32 * reg_bytes;
        writeln!(loads, "    ld.param.u64 %ptr, [{param}];").unwrap();
        writeln!(loads, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
        writeln!(loads, "    mul.wide.u32 %off, %slot, {lane_bytes};").unwrap();
        writeln!(loads, "    add.u64 %ptr, %ptr, %off;").unwrap();
        for (i, r) in op_regs.iter().enumerate() {
            writeln!(
                loads,
                "    ld.global.{ty} {r}, [%ptr+{}];",
                i as u32 * reg_bytes
            )
            .unwrap();
        }
    };
    for (op, param) in [
        (Operand::A, "p_a"),
        (Operand::B, "p_b"),
        (Operand::C, "p_c"),
    ] {
        let list = match op {
            Operand::A => &regs.a,
            Operand::B => &regs.b,
            _ => &regs.c,
        };
        let f = v.fragment(op);
        load_block(param, list, v.reg_type(op), f.reg_bits / 8);
    }
    if v.scale.is_some() {
        decls += "    .reg .b32 %scale_a, %scale_b;\n";
        regs.scale_a = "%scale_a".into();
        regs.scale_b = "%scale_b".into();
        load_block("p_scale_a", &["%scale_a".to_string()], "b32", 4);
        load_block("p_scale_b", &["%scale_b".to_string()], "b32", 4);
    }
    if v.sparse.is_some() {
        decls += "    .reg .b32 %meta;\n";
        regs.meta = "%meta".into();
        regs.sparsity_selector = sparsity;
        load_block("p_meta", &["%meta".to_string()], "b32", 4);
    }
    let fd = v.fragment(Operand::D);
    let mut stores = String::new();
    let reg_bytes = fd.reg_bits / 8;
    writeln!(stores, "    ld.param.u64 %ptr, [p_d];").unwrap();
    writeln!(stores, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
    writeln!(
        stores,
        "    mul.wide.u32 %off, %slot, {};",
        fd.regs * reg_bytes
    )
    .unwrap();
    writeln!(stores, "    add.u64 %ptr, %ptr, %off;").unwrap();
    for (i, r) in regs.d.iter().enumerate() {
        writeln!(
            stores,
            "    st.global.{} [%ptr+{}], {r};",
            v.reg_type(Operand::D),
            i as u32 * reg_bytes
        )
        .unwrap();
    }
    // The metadata pointer is a parameter of sparse kernels only: dense kernels keep the text
    // their committed maps record.
    let template = if v.sparse.is_some() {
        FRAGMENT_TEMPLATE.replace(
            "    .param .u64 p_scale_b,\n",
            "    .param .u64 p_scale_b,\n    .param .u64 p_meta,\n",
        )
    } else {
        FRAGMENT_TEMPLATE.to_string()
    };
    template
        .replace("{{PTX_VERSION}}", &v.ptx_version())
        .replace("{{TARGET}}", &target.to_string())
        .replace("{{DECLS}}", decls.trim_end())
        .replace("{{LOADS}}", loads.trim_end())
        .replace("{{MMA}}", &v.instruction(&regs, sel))
        .replace("{{STORES}}", stores.trim_end())
}
