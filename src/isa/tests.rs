//! Register geometry, ids and spellings of the catalog.

use super::*;

#[test]
fn register_counts_match_the_isa() {
    let cat = catalog();
    let get = |id: &str| {
        cat.iter()
            .find(|v| v.id() == id)
            .unwrap_or_else(|| panic!("{id} missing"))
            .clone()
    };
    let regs = |v: &Variant| {
        (
            v.fragment(Operand::A).regs,
            v.fragment(Operand::B).regs,
            v.fragment(Operand::C).regs,
        )
    };
    assert_eq!(regs(&get("m16n8k16.f32.f16.f16.f32")), (4, 2, 4));
    assert_eq!(regs(&get("m16n8k16.f16.f16.f16.f16")), (4, 2, 2));
    assert_eq!(regs(&get("m16n8k8.f32.tf32.tf32.f32")), (4, 2, 4));
    assert_eq!(regs(&get("m8n8k4.f64.f64.f64.f64")), (1, 1, 2));
    assert_eq!(regs(&get("m16n8k16.f64.f64.f64.f64")), (8, 4, 4));
    assert_eq!(regs(&get("m16n8k32.s32.s8.s8.s32")), (4, 2, 4));
    assert_eq!(regs(&get("m16n8k64.s32.s4.s4.s32")), (4, 2, 4));
    assert_eq!(regs(&get("m16n8k256.s32.b1.b1.s32.and.popc")), (4, 2, 4));
    // The FP4 mistake the seed article made: 4 A and 2 B registers, not 2 and 1.
    let mx = get("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0");
    assert_eq!(regs(&mx), (4, 2, 4));
    assert_eq!(mx.fragment(Operand::A).container_bits, 8);
    let nv = get("m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3");
    assert_eq!(regs(&nv), (4, 2, 4));
    assert_eq!(nv.fragment(Operand::A).container_bits, 4);
}

#[test]
fn container_insert_extract_roundtrip() {
    let v = find("m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32").unwrap();
    let fa = v.fragment(Operand::A);
    let mut w = vec![0u32; fa.words_per_lane() as usize];
    fa.insert(&mut w, 1, 2, 0x2);
    // 1.0 as e2m1 sits in bits 5..2 of byte 2 of register 1: 0x08 << 16.
    assert_eq!(w[1], 0x0008_0000);
    assert_eq!(fa.extract(&w, 1, 2), 0x2);
}

#[test]
fn ptx_spellings_find_their_variant() {
    let bf16 = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    for text in [
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f4, %f5, %f6, %f7};",
        "mma.sync.aligned.row.col.m16n8k16.f32.bf16.bf16.f32;",
    ] {
        assert_eq!(find(text).as_ref(), Some(&bf16), "{text}");
    }
    let nv = find("m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3");
    assert_eq!(
        find(
            "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
        ),
        nv
    );
    assert_eq!(
        find(
            "mma.sync.aligned.kind::mxf4nvf4.m16n8k64.row.col.scale_vec::4X.block_scale.f32.e2m1.e2m1.f32.ue4m3"
        ),
        nv
    );
    // Types are positional: swapping A and B names another variant, or none.
    let e4e5 = find("m16n8k32.f32.e4m3.e5m2.f32").unwrap();
    assert_eq!(
        find("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32").as_ref(),
        Some(&e4e5)
    );
    assert_ne!(
        find("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32").as_ref(),
        Some(&e4e5)
    );
    assert!(find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16").is_none());
    assert!(find("f32.bf16.bf16.f32").is_none());
    for v in catalog() {
        assert_eq!(find(&v.opcode()).as_ref(), Some(&v), "{}", v.opcode());
    }
}

#[test]
fn ids_roundtrip_through_find() {
    for v in catalog() {
        assert_eq!(find(&v.id()).as_ref(), Some(&v));
        assert_eq!(find(&v.file_stem()).as_ref(), Some(&v));
    }
}

#[test]
fn each_family_has_its_count() {
    let cat = catalog();
    let count = |f: &dyn Fn(&Variant) -> bool| cat.iter().filter(|v| f(v)).count();
    assert_eq!(count(&|v| v.family() == "mma.sync"), 173);
    assert_eq!(count(&|v| v.family() == "mma.sp"), 171);
    assert_eq!(probed().len(), 143);
    // The m8n8 shapes beside f64: m8n8k4 f16 (4 layouts x 3 type pairs), 8 s8/u8, 8 s4/u4, 2 b1.
    assert_eq!(count(&|v| v.shape.m == 8 && v.a != ElemType::F64), 30);
    assert_eq!(count(&|v| v.sparse == Some(Sparsity::Sp)), 44);
    assert_eq!(count(&|v| v.sparse == Some(Sparsity::OrderedMetadata)), 127);
    // Block-scaled sparse: 25 mxf8f6f4, 1 mxf4, 3 mxf4nvf4.
    assert_eq!(count(&|v| v.sparse.is_some() && v.scale.is_some()), 29);
    let ids: std::collections::HashSet<String> = cat.iter().map(|v| v.id()).collect();
    assert_eq!(ids.len(), cat.len(), "ids are unique");
    for v in &cat {
        assert_eq!(
            v.not_probed().is_none(),
            v.sparse.is_none() && (v.shape.m != 8 || v.a == ElemType::F64),
            "{}",
            v.id()
        );
    }
}

#[test]
fn sparse_and_m8n8_geometry() {
    let get = |id: &str| find(id).unwrap_or_else(|| panic!("{id} missing"));
    let regs = |v: &Variant| Operand::ALL.map(|op| v.fragment(op).regs);
    // A of a sparse variant holds the kept half: m×k/2.
    assert_eq!(regs(&get("sp.m16n8k16.f32.f16.f16.f32")), [2, 2, 4, 4]);
    assert_eq!(regs(&get("sp.m16n8k32.f16.f16.f16.f16")), [4, 4, 2, 2]);
    assert_eq!(regs(&get("sp.m16n8k8.f32.tf32.tf32.f32")), [2, 2, 4, 4]);
    assert_eq!(regs(&get("sp.m16n8k64.s32.s4.s4.s32")), [2, 2, 4, 4]);
    let mx = get(
        "sp::ordered_metadata.m16n8k128.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
    );
    assert_eq!(regs(&mx), [4, 4, 4, 4]);
    assert_eq!(
        (mx.fragment(Operand::A).rows, mx.fragment(Operand::A).cols),
        (16, 64)
    );
    let f6 = get("sp::ordered_metadata.m16n8k64.kind::f8f6f4.f32.e3m2.e2m1.f32");
    assert_eq!(regs(&f6), [4, 4, 4, 4]);
    assert_eq!(f6.fragment(Operand::A).container_bits, 8);
    // m8n8k4 with f16: four products per warp, one per quad pair.
    let q = get("m8n8k4.col.row.f32.f16.f16.f16");
    assert_eq!(regs(&q), [2, 2, 4, 8]);
    assert_eq!(q.products_per_warp(), 4);
    assert_eq!(regs(&get("m8n8k16.satfinite.s32.u8.s8.s32")), [1, 1, 2, 2]);
    assert_eq!(regs(&get("m8n8k32.s32.s4.u4.s32")), [1, 1, 2, 2]);
    assert_eq!(regs(&get("m8n8k128.s32.b1.b1.s32.xor.popc")), [1, 1, 2, 2]);
}

#[test]
fn sparse_and_layout_spellings() {
    let v = find("sp::ordered_metadata.m16n8k32.f32.bf16.bf16.f32").unwrap();
    assert_eq!(
        v.opcode(),
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"
    );
    assert_eq!(
        v.file_stem(),
        "sp_ordered_metadata.m16n8k32.f32.bf16.bf16.f32"
    );
    // `.sp` and `.sp::ordered_metadata` are two variants; neither is the dense one.
    let plain_sp = find("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32").unwrap();
    assert_eq!(plain_sp.sparse, Some(Sparsity::Sp));
    assert_ne!(plain_sp, v);
    assert!(find("mma.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32").is_none());
    // The layouts of m8n8k4 f16 are part of the variant; `.row.col` is the default spelling.
    let cr = find("mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32").unwrap();
    assert_eq!(cr.id(), "m8n8k4.col.row.f32.f16.f16.f32");
    assert_eq!((cr.alayout, cr.blayout), (Major::Col, Major::Row));
    let rc = find("m8n8k4.f32.f16.f16.f32").unwrap();
    assert_eq!(rc.id(), "m8n8k4.row.col.f32.f16.f16.f32");
    assert!(find("mma.sync.aligned.m8n8k4.col.row.f64.f64.f64.f64").is_none());
    assert!(find("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32").is_none());
}

#[test]
fn instruction_text_has_metadata_and_register_selectors() {
    let v = find(
        "sp::ordered_metadata.m16n8k128.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
    )
    .unwrap();
    let names = |p: &str, n: u32| (0..n).map(|i| format!("%{p}{i}")).collect::<Vec<_>>();
    let mut regs = OperandRegs {
        a: names("a", 4),
        b: names("b", 4),
        c: names("c", 4),
        d: names("d", 4),
        scale_a: "%sa".into(),
        scale_b: "%sb".into(),
        meta: "%e".into(),
        ..Default::default()
    };
    let sel = ScaleSelectors {
        byte_a: 2,
        thread_a: 1,
        byte_b: 0,
        thread_b: 0,
    };
    let text = v.instruction(&regs, sel);
    assert!(
        text.ends_with("{%c0, %c1, %c2, %c3}, %e, 0, %sa, {2, 1}, %sb, {0, 0};"),
        "{text}"
    );
    regs.selector_regs = Some(["%ba", "%ta", "%bb", "%tb"].map(String::from));
    let text = v.instruction(&regs, sel);
    assert!(
        text.ends_with("%e, 0, %sa, {%ba, %ta}, %sb, {%bb, %tb};"),
        "{text}"
    );
}

#[test]
fn a_left_out_scale_vec_is_the_default_of_the_kind() {
    let mx4 = find("m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0");
    assert!(mx4.is_some());
    assert_eq!(
        find("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"),
        mx4
    );
    let sp = find(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
    )
    .unwrap();
    assert_eq!(sp.scale.map(|s| s.vec), Some(2));
    let mx8 = find(
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e3m2.e2m1.f32.ue8m0",
    )
    .unwrap();
    assert_eq!(
        mx8.id(),
        "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e3m2.e2m1.f32.ue8m0"
    );
    // kind::mxf4nvf4 has no default (ptxas requires the qualifier: rejected.rs).
    assert!(
        find(
            "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
        )
        .is_none()
    );
}

#[test]
fn no_near_miss_is_listed_twice() {
    // The same spelling may be refused for several targets or PTX versions, each its own entry;
    // the same spelling, target and version twice is one experiment listed twice.
    let key = |ptx: &str, target: &'static str, version: &'static str| {
        (
            ptx.split_whitespace().collect::<Vec<_>>().join(" "),
            target,
            version,
        )
    };
    let all: Vec<_> = rejected_spellings()
        .into_iter()
        .chain(matrix::rejected_spellings())
        .map(|r| key(r.ptx, r.target, r.ptx_version))
        .chain(
            crate::wgmma::rejected::rejected_spellings()
                .iter()
                .map(|r| key(&r.ptx, r.target, r.ptx_version)),
        )
        .collect();
    let mut seen = std::collections::HashSet::new();
    for k in &all {
        assert!(seen.insert(k), "listed twice: {k:?}");
    }
    assert!(all.len() >= 98, "{}", all.len());
}
