//! One catalog instruction in a complete PTX module: what ptxas is given to accept or refuse a
//! catalog entry, and to show the SASS it becomes (`tests/ptxas_catalog.rs`). Unlike the probe
//! kernels it runs nothing the host reads back; it has only to keep the instruction alive.
//! Every lane loads its source registers from global memory (so nothing folds to a constant)
//! and stores its results.

use super::matrix::{MatrixOp, MatrixVariant};
use super::{DEFAULT_PTX, Operand, OperandRegs, ScaleSelectors, Target, Variant};
use std::fmt::Write;

/// The kernel entry point's name.
pub const ENTRY: &str = "fp4probe_catalog";

/// How a block-scaled instruction gives its `{byte-id, thread-id}` selectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SelectorForm {
    /// Immediates (`{0, 0}`).
    #[default]
    Immediate,
    /// `.u16` registers, loaded like every other source.
    U16Registers,
}

/// What varies between modules of one variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmaOptions {
    pub selectors: SelectorForm,
    /// The sparsity selector of a sparse variant.
    pub sparsity_selector: u32,
}

/// Loads of the sources from `%in` (this lane's input row) and stores of the results to `%out`,
/// accumulated as the module is built.
#[derive(Default)]
struct Body {
    decls: String,
    loads: String,
    stores: String,
    in_bytes: u32,
    out_bytes: u32,
}

impl Body {
    /// Declare `names` as `.ty` registers of `bytes` each and load them.
    fn load(&mut self, ty: &str, names: &[String], bytes: u32) {
        writeln!(self.decls, "    .reg .{ty} {};", names.join(", ")).unwrap();
        for n in names {
            writeln!(
                self.loads,
                "    ld.global.{ty} {n}, [%in+{}];",
                self.in_bytes
            )
            .unwrap();
            self.in_bytes += bytes;
        }
    }
    /// Declare `names` as `.ty` registers of `bytes` each and store them.
    fn store(&mut self, ty: &str, names: &[String], bytes: u32, declare: bool) {
        if declare {
            writeln!(self.decls, "    .reg .{ty} {};", names.join(", ")).unwrap();
        }
        for n in names {
            writeln!(
                self.stores,
                "    st.global.{ty} [%out+{}], {n};",
                self.out_bytes
            )
            .unwrap();
            self.out_bytes += bytes;
        }
    }
    /// The module around `instruction`.
    fn module(self, version: &str, target: Target, shared: bool, instruction: &str) -> String {
        let tile = if shared {
            ".shared .align 16 .b8 tile[1024];\n\n"
        } else {
            ""
        };
        let address = if shared {
            "    mov.u64 %addr, tile;\n    mul.wide.u32 %off, %lane, 16;\n    \
             add.u64 %addr, %addr, %off;\n"
        } else {
            ""
        };
        format!(
            ".version {version}\n.target {target}\n.address_size 64\n\n{tile}\
             .visible .entry {ENTRY}(\n    .param .u64 p_in,\n    .param .u64 p_out\n)\n{{\n    \
             .reg .b32 %lane;\n    .reg .b64 %in, %out, %off, %addr;\n{decls}    \
             mov.u32 %lane, %tid.x;\n    ld.param.u64 %in, [p_in];\n    \
             cvta.to.global.u64 %in, %in;\n    mul.wide.u32 %off, %lane, {in_bytes};\n    \
             add.u64 %in, %in, %off;\n    ld.param.u64 %out, [p_out];\n    \
             cvta.to.global.u64 %out, %out;\n    mul.wide.u32 %off, %lane, {out_bytes};\n    \
             add.u64 %out, %out, %off;\n{address}{loads}    {instruction}\n{stores}    ret;\n}}\n",
            decls = self.decls,
            in_bytes = self.in_bytes.max(4),
            out_bytes = self.out_bytes.max(4),
            loads = self.loads,
            stores = self.stores,
        )
    }
}

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("%{prefix}{i}")).collect()
}

/// The module holding `v` for `target`: A, B and C (and the metadata, scale words and
/// `.u16` selectors where `v` has them) loaded, D stored.
pub fn mma_module(v: &Variant, target: Target, options: MmaOptions) -> String {
    let mut body = Body::default();
    let mut regs = OperandRegs {
        sparsity_selector: options.sparsity_selector,
        ..Default::default()
    };
    for (op, prefix) in [(Operand::A, "a"), (Operand::B, "b"), (Operand::C, "c")] {
        let f = v.fragment(op);
        let list = names(prefix, f.regs);
        body.load(v.reg_type(op), &list, f.reg_bits / 8);
        match op {
            Operand::A => regs.a = list,
            Operand::B => regs.b = list,
            _ => regs.c = list,
        }
    }
    if v.sparse.is_some() {
        body.load("b32", &["%meta".to_string()], 4);
        regs.meta = "%meta".into();
    }
    if v.scale.is_some() {
        body.load("b32", &["%scale_a".into(), "%scale_b".into()], 4);
        regs.scale_a = "%scale_a".into();
        regs.scale_b = "%scale_b".into();
        if options.selectors == SelectorForm::U16Registers {
            let sel = ["%byte_a", "%thread_a", "%byte_b", "%thread_b"].map(String::from);
            body.load("u16", &sel, 2);
            regs.selector_regs = Some(sel);
        }
    }
    let fd = v.fragment(Operand::D);
    regs.d = names("d", fd.regs);
    body.store(v.reg_type(Operand::D), &regs.d, fd.reg_bits / 8, true);
    let text = v.instruction(&regs, ScaleSelectors::default());
    body.module(&v.ptx_version(), target, false, &text)
}

/// The module holding `v` for `target`: each lane's row address in a shared tile; `ldmatrix`
/// stores what it loaded, `stmatrix` and `movmatrix` load what they move.
pub fn matrix_module(v: &MatrixVariant, target: Target) -> String {
    let mut body = Body::default();
    let regs = names("r", v.regs());
    let text = match v.op {
        MatrixOp::Ldmatrix => {
            body.store("b32", &regs, 4, true);
            v.instruction(&regs, "%addr")
        }
        MatrixOp::Stmatrix => {
            body.load("b32", &regs, 4);
            v.instruction(&regs, "%addr")
        }
        MatrixOp::Movmatrix => {
            body.load("b32", &["%src".to_string()], 4);
            body.store("b32", &["%dst".to_string()], 4, true);
            v.instruction(&["%dst".into(), "%src".into()], "")
        }
    };
    let (maj, min) = DEFAULT_PTX;
    body.module(&format!("{maj}.{min}"), target, true, &text)
}
