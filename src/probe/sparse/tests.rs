use super::*;
use crate::device::emulator::Emulator;
use crate::isa::catalog;
use crate::layout::meta::{documented_meta, emulated_meta};

/// One sparse variant per geometry: every (shape, A type, kind, scale) of `mma.sp`, without
/// `.satfinite` and with A and B of one type.
fn representatives() -> Vec<Variant> {
    let mut seen = std::collections::HashSet::new();
    catalog()
        .into_iter()
        .filter(|v| v.sparse.is_some() && !v.satfinite && v.a == v.b)
        .filter(|v| seen.insert((v.shape, v.a, v.kind, v.scale.map(|s| s.vec))))
        .collect()
}

#[test]
fn the_emulator_gives_back_the_maps_it_runs_in_every_geometry() {
    let emu = Emulator::new();
    for v in representatives() {
        let out = probe(&emu, &v, 7, false).unwrap();
        assert!(
            out.passed(),
            "{}: {:?}",
            v.id(),
            out.lanes.layout.as_ref().err()
        );
        assert_eq!(
            out.lanes.layout.as_ref().unwrap(),
            &documented(&v),
            "{}",
            v.id()
        );
        let g = SparseGeom::of(&v).unwrap();
        assert_eq!(
            out.selectors.len() as u32,
            g.documented_selectors(v.shape.m)
        );
        for s in &out.selectors {
            assert_eq!(
                s.fields.as_ref().unwrap(),
                &emulated_meta(&v, s.selector),
                "{} selector {}",
                v.id(),
                s.selector
            );
        }
    }
}

#[test]
fn a_permuted_metadata_map_is_found_as_it_is() {
    let v = crate::isa::find("sp.m16n8k32.f32.bf16.bf16.f32").unwrap();
    // Swap the lanes of each selector pair and the two rows' halves: a map nothing documents.
    let mut fields = documented_meta(&v, 1);
    for f in &mut fields {
        f.lane ^= 1;
        f.bit ^= 16;
    }
    fields.sort();
    let emu = Emulator::new().with_meta(&v, 1, fields.clone());
    let out = probe(&emu, &v, 3, false).unwrap();
    assert!(out.passed());
    assert_eq!(out.selectors[1].fields.as_ref().unwrap(), &fields);
    assert_eq!(
        out.selectors[0].fields.as_ref().unwrap(),
        &documented_meta(&v, 0)
    );
}

#[test]
fn a_wrong_metadata_map_fails_validation_not_silently() {
    let v = crate::isa::find("sp.m16n8k16.f32.f16.f16.f32").unwrap();
    let emu = Emulator::new();
    let g = SparseGeom::of(&v).unwrap();
    let layout = documented(&v);
    let mut fields = documented_meta(&v, 0);
    // Exchange rows g and g + 8: every nibble stays valid but lands on the other row.
    for f in &mut fields {
        f.row ^= 8;
    }
    let check = validate(&emu, &v, &g, &layout, &fields, 0, 5).unwrap();
    assert!(!check.random.passed);
}

#[test]
fn invalid_metadata_is_an_emulator_error() {
    let v = crate::isa::find("sp.m16n8k16.f32.f16.f16.f32").unwrap();
    let mut batch = Batch::zeroed(&v, 1);
    batch.meta.fill(0);
    let err = Emulator::new()
        .run(&v, ScaleSelectors::default(), &batch)
        .unwrap_err();
    assert!(format!("{err:#}").contains("undefined"), "{err:#}");
    batch.meta.fill(splat(LO));
    batch.sparsity_selector = 4;
    assert!(
        Emulator::new()
            .run(&v, ScaleSelectors::default(), &batch)
            .is_err()
    );
}

#[test]
fn undocumented_selectors_are_recorded_as_failed_launches_not_errors() {
    // ptxas takes selectors 2 and 3 of m16n8k32 f16 with f32 accumulators; the PTX ISA names
    // two, and the emulator has no model for the others: the probe records the refusal.
    let v = crate::isa::find("sp.m16n8k32.f32.f16.f16.f32").unwrap();
    let out = probe(&Emulator::new(), &v, 1, true).unwrap();
    assert!(out.passed());
    assert_eq!(out.selectors.len(), 3);
    let last = &out.selectors[2];
    assert!(!last.documented);
    assert!(
        last.fields.as_ref().unwrap_err().contains("names"),
        "{:?}",
        last.fields
    );
}
