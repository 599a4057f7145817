//! The markdown page of a wgmma register lane map (`fp4probe.wgmma-lanemap/1`): status,
//! provenance, how to reproduce, the convention, validation, the diff against the documented
//! layout, which rows and columns each warp holds, a picture per register operand, and the
//! shared-memory tiles the probe read.

use super::super::GENERATED;
use super::super::md::{
    code, data_links, plural, provenance_section, ptx_section, ranges, status_section,
    validation_section, work_line,
};
use super::{INDEX_LINK, INDEX_NAME, Pictures, smem_fit};
use crate::device::BackendKind;
use crate::wgmma::grid::{RegGrid, TileGrid, axis_names};
use crate::wgmma::map::WgLaneMap;
use crate::wgmma::model::{a_reg_coord, d_coord};
use crate::wgmma::{ASource, WgVariant};
use std::fmt::Write;

/// D and C are pictured up to this N; A always (at most 64 × 256, b1, in runs of 32).
pub const PICTURE_MAX_N: u32 = 64;

/// Whether a register operand of `v` gets a picture.
pub fn pictured(v: &WgVariant, operand: &str) -> bool {
    operand == "A" || v.n <= PICTURE_MAX_N
}

/// One slot the map places elsewhere than the documented layout.
struct Moved {
    operand: String,
    slot: [u32; 3],
    here: (u32, u32),
    documented: (u32, u32),
}

/// Slots whose (row, col) differs from the documented layout (`model.rs`), in map order.
fn moved(map: &WgLaneMap, v: &WgVariant) -> Vec<Moved> {
    let mut out = Vec::new();
    for r in &map.registers {
        let f = if r.operand == "A" {
            v.a_frag()
        } else {
            v.d_frag()
        };
        let coord = |i: usize| {
            if r.operand == "A" {
                a_reg_coord(&f, i)
            } else {
                d_coord(&f, i)
            }
        };
        for &[t, reg, e, row, col] in &r.slots {
            let doc = coord(f.index(t, reg, e));
            if doc != (row, col) {
                out.push(Moved {
                    operand: r.operand.clone(),
                    slot: [t, reg, e],
                    here: (row, col),
                    documented: doc,
                });
            }
        }
    }
    out
}

pub fn render(map: &WgLaneMap, v: &WgVariant, pictures: &Pictures) -> String {
    let mut s = String::new();
    let stem = map.variant.clone();
    let p = &map.provenance;
    let _ = writeln!(s, "{GENERATED}\n\n# {}\n", code(&map.variant));
    status_section(&mut s, map.status, p, map.failure.as_deref());
    let a_from = match v.a_src {
        ASource::Rs => "registers",
        ASource::Ss => "shared memory",
    };
    let _ = writeln!(
        s,
        "{} — m64n{}k{}, A {} (from {a_from}), B {} (from shared memory), C and D {}; one warpgroup (128 threads in 4 warps); minimum target {}.\n",
        code(&map.instruction),
        v.n,
        v.k,
        v.a,
        v.b,
        v.d,
        v.min_target()
    );
    if pictures.links {
        data_links(
            &mut s,
            &stem,
            !map.registers.is_empty(),
            INDEX_NAME,
            INDEX_LINK,
        );
    }
    provenance_section(
        &mut s,
        p,
        work_line(
            map.timing.work.experiments,
            map.timing.work.launches,
            "",
            map.timing.wall_s,
        ),
    );
    reproduce(&mut s, map);
    let _ = writeln!(
        s,
        "## Labelling convention\n\n> {}\n\n`lane` in the map and its CSV is the thread 0–127 of the warpgroup: warp = thread/32, lane within the warp = thread%32 (`T37` is warp 1, lane 5). `reg` is the register index within the operand and `elem` the element within the register (low bits first). A is m×k, C and D are m×n: row and col are those of the operand's own matrix.\n",
        super::super::md::cell(&map.convention)
    );
    validation_section(&mut s, map.validation.as_ref());
    documented(&mut s, map, v);

    let grids = RegGrid::all(map, v);
    if grids.is_empty() {
        s.push_str(
            "## Register operands\n\nNo layout was inferred, so there are no operand tables.",
        );
        if let Some(raw) = &map.raw {
            let _ = write!(
                s,
                " The JSON keeps the raw observations: the D slots each one-hot A ({} positions), B ({}) and C ({}) experiment lit.",
                raw.a_lit.len(),
                raw.b_lit.len(),
                raw.c_lit.len()
            );
        }
        s.push_str("\n\n");
    } else {
        warps(&mut s, &grids);
    }
    let d = grids.iter().find(|g| g.operand == "D");
    for g in &grids {
        let elem = if g.operand == "A" { v.a } else { v.d };
        let (rn, cn) = axis_names(&g.operand);
        let _ = writeln!(
            s,
            "## {} — {rn}×{cn} = {}×{}, {elem}\n",
            g.operand, g.rows, g.cols
        );
        if g.operand == "C"
            && let Some(d) = d
            && g.same_cells(d)
        {
            s.push_str("C holds every element in the same thread, register and element as D: the instruction reads C from D's registers. The picture of D shows both.\n\n");
            continue;
        }
        let _ = writeln!(
            s,
            "Per thread {} × {}: {} slots for {} elements{}.\n",
            plural(g.regs, "register", "registers"),
            plural(g.elems_per_reg, "element", "elements"),
            128 * g.regs * g.elems_per_reg,
            g.rows * g.cols,
            match g.empty_cells() {
                0 => String::new(),
                n => format!("; {} no slot holds", plural(n as u64, "cell", "cells")),
            }
        );
        if pictures.regs.contains(&g.operand) {
            let _ = writeln!(s, "![{op}]({stem}.{op}.svg)\n", op = g.operand);
        } else {
            let _ = writeln!(
                s,
                "No picture: D and C are pictured up to N = {PICTURE_MAX_N}. The CSV lists every slot, and `fp4probe view {stem}.json` scrolls the grid.\n"
            );
        }
    }
    smem_section(&mut s, map, v, &stem, pictures);
    ptx_section(&mut s, p);
    s
}

fn reproduce(s: &mut String, map: &WgLaneMap) {
    let st = &map.setting;
    let mut cmd = format!("fp4probe wgmma probe --variant {}", map.variant);
    if st.b_desc.swizzle != crate::wgmma::desc::Swizzle::None {
        let _ = write!(cmd, " --swizzle {}", st.b_desc.swizzle);
    }
    if st.b_major != crate::wgmma::desc::Major::K {
        let _ = write!(cmd, " --major {}", st.b_major);
    }
    let _ = writeln!(s, "\n## Reproduce\n\n```sh\n{cmd}\n```\n");
    match map.backend {
        BackendKind::Hardware => s.push_str(
            "On an sm_90a GPU (H100, H200) this measures the map again (`--backend cuda` refuses the emulator fallback); `-o DIR` names the folder. `fp4probe report` turns the map into this page.\n\n",
        ),
        BackendKind::Emulator => s.push_str(
            "Without a GPU this runs the emulator, as it did for this page; on an sm_90a GPU (H100, H200) the same command measures it on hardware (`--backend cuda` refuses the emulator fallback).\n\n",
        ),
    }
}

fn documented(s: &mut String, map: &WgLaneMap, v: &WgVariant) {
    s.push_str("## Against the PTX ISA's documented layout\n\n");
    let counts: Vec<String> = map
        .registers
        .iter()
        .map(|r| format!("{} {}", r.operand, r.slots.len()))
        .collect();
    match map.documented_mismatches {
        None => s.push_str("Not compared: there is no layout.\n\n"),
        Some(0) => {
            let _ = writeln!(
                s,
                "**Identical**, slot for slot, to the register fragments the PTX ISA documents for wgmma (slots compared: {}).\n",
                counts.join(", ")
            );
        }
        Some(n) => {
            let list = moved(map, v);
            let _ = writeln!(
                s,
                "**Different.** The map records {} that the documented layout places elsewhere; the first {} (against `src/wgmma/model.rs`, the documented layout as formulas):\n\n| operand | thread | reg | elem | this map (row, col) | documented (row, col) |\n| --- | ---: | ---: | ---: | --- | --- |",
                plural(n as u64, "slot", "slots"),
                list.len().min(16)
            );
            for m in list.iter().take(16) {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {}, {} | {}, {} |",
                    m.operand,
                    m.slot[0],
                    m.slot[1],
                    m.slot[2],
                    m.here.0,
                    m.here.1,
                    m.documented.0,
                    m.documented.1
                );
            }
            s.push('\n');
        }
    }
}

/// Which rows and columns of each operand each warp holds, from the map.
fn warps(s: &mut String, grids: &[RegGrid]) {
    s.push_str("## Warps\n\nThe rows and columns of each register operand that each warp of the warpgroup holds, read from the map (the pictures band the rows by warp and draw a thick line where the owning warp changes):\n\n| warp | threads |");
    for g in grids {
        let _ = write!(s, " {op} rows | {op} cols |", op = g.operand);
    }
    s.push_str("\n| ---: | --- |");
    for _ in grids {
        s.push_str(" --- | --- |");
    }
    s.push('\n');
    for w in 0..4 {
        let _ = write!(s, "| {w} | {}–{} |", 32 * w, 32 * w + 31);
        for g in grids {
            let (rows, cols) = g.warp_extent(w);
            let show = |x: &[u32], all: u32| {
                if x.is_empty() {
                    "—".to_string()
                } else if x.len() as u32 == all {
                    format!("all {all}")
                } else {
                    ranges(x)
                }
            };
            let _ = write!(s, " {} | {} |", show(&rows, g.rows), show(&cols, g.cols));
        }
        s.push('\n');
    }
    s.push('\n');
}

/// The shared-memory tiles the probe read, their descriptors and fitted forms.
fn smem_section(s: &mut String, map: &WgLaneMap, v: &WgVariant, stem: &str, pictures: &Pictures) {
    let tiles = TileGrid::of_lane_map(map, v);
    if map.registers.is_empty() {
        return;
    }
    let st = &map.setting;
    s.push_str("## Shared-memory operands during the probe\n\nWhere each element of the tiles the probe placed in shared memory lay (bytes from the descriptor's start), fitted to a closed form (`byte = X(start + Σ weight · coordinate bits) − start`, X the XOR pattern that makes the map linear); the shared-memory studies sweep these settings.\n\n| operand | major | swizzle | start | LBO | SBO | base offset | fitted form |\n| --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n");
    for t in &tiles {
        let (major, d, entries) = if t.operand == "A" {
            (st.a_major, st.a_desc, map.smem_a.as_deref().unwrap_or(&[]))
        } else {
            (st.b_major, st.b_desc, &map.smem_b[..])
        };
        let form = smem_fit(entries, d.start)
            .map(|f| code(&f.formula))
            .unwrap_or_else(|| "no closed form fits".into());
        let _ = writeln!(
            s,
            "| {} | {major} | {} | {} | {} | {} | {} | {form} |",
            t.operand, d.swizzle, d.start, d.lbo, d.sbo, d.base_offset
        );
    }
    s.push('\n');
    for t in &tiles {
        if pictures.tiles.contains(&t.operand) {
            let _ = writeln!(
                s,
                "![{op} in shared memory]({stem}.{op}.smem.svg)\n",
                op = t.operand
            );
        }
    }
}
