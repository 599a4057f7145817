//! Emulator records for unit tests of what reads them (reports, the viewer): the documented
//! layouts through the CPU model, made in-process as `fp4probe wgmma probe|smem --backend
//! emulator` makes them.

use super::backend::WgBackend;
use super::desc::{Major, Swizzle};
use super::emulator::WgEmulator;
use super::map::{WgLaneMap, WgSmemMap};
use super::probe::{Setting, Work, probe};
use super::smem::{point, study_variant, sweep_settings};
use crate::provenance::Provenance;

/// The emulator's lane map of `id` under packed K-major tiles without swizzle.
pub fn lane_map(id: &str) -> WgLaneMap {
    let v = super::find(id).expect("a catalog id");
    let emu = WgEmulator::new();
    let setting = Setting::packed(&v, Swizzle::None, Major::K, Major::K);
    let out = probe(&emu, &v, &setting, 1).expect("the emulator runs every dense variant");
    WgLaneMap::new(
        &v,
        &setting,
        &out,
        Provenance::new(emu.info(), String::new()),
    )
}

/// The emulator's shared-memory study of `bits`-bit elements under `major` and `swizzle`.
pub fn study(bits: u32, major: Major, swizzle: Swizzle) -> WgSmemMap {
    let v = study_variant(bits);
    let emu = WgEmulator::new();
    let mut points = Vec::new();
    let mut packed = None;
    let mut work = Work::default();
    for (label, setting) in sweep_settings(&v, swizzle, major) {
        if setting.check(&v).is_err() {
            continue;
        }
        let (p, out) = point(&emu, &v, &label, &setting, 1).expect("the emulator runs it");
        work.experiments += out.work.experiments;
        work.launches += out.work.launches;
        points.push(p);
        packed.get_or_insert(out);
    }
    let packed = packed.expect("the packed setting fits");
    let prov = Provenance::new(emu.info(), String::new());
    WgSmemMap::new(&v, swizzle, major, &packed, points, prov, 0.0, work)
}
