//! `fp4probe codegen` for `wgmma.mma_async`: the measured wgmma maps (`reports/sm_90/wgmma`)
//! as C++ headers and Rust tables, and `--verify` on the GPU.
//!
//! From the hardware lane maps (`fp4probe.wgmma-lanemap/1`) and shared-memory studies
//! (`fp4probe.wgmma-smem/1`) this writes, under `kernels/generated/wgmma/`:
//!
//! - `d.<type>.n<N>.cuh`: the D (accumulator) table of one accumulator type and N, with its
//!   inverse and closed form, from every map that measured it (they must agree);
//! - `a.<type>.k<K>.cuh`: the table of A from registers of one type and K;
//! - `<family>.cuh` per (type set, N) (`m64n64k16.f32.bf16.bf16`, the opcode's qualifiers):
//!   the family's D and A (tables where they were measured; where the family has no map, the
//!   closed form the maps of its accumulator type share, stated as such), the inline-PTX
//!   wrappers of its `ss` and `rs` forms, and a `Traits` struct;
//! - `fp4probe_wgmma_smem.cuh`: per element size, major-ness and swizzle mode the byte offset
//!   of element (mn, k) from a descriptor's start (the fitted XOR pattern and weights, with
//!   LBO and SBO where the study's sweep measured them), and the descriptor builder;
//! - `fp4probe_wgmma.cuh`, which includes them all;
//!
//! and `src/generated/wgmma.rs` (the same tables and forms for Rust host code).

pub mod cpp;
pub mod form;
pub mod handoff;
pub mod rust;
pub mod tables;
pub mod verify;

use super::formula::Formula;
use super::{OperandData, Options, OutFile};
use crate::device::BackendKind;
use crate::isa::{Fragment, Operand};
use crate::layout::fit::fit_slots;
use crate::layout::{Coord, SlotSpace};
use crate::wgmma::map::{LANEMAP_SCHEMA, RegMap, SMEM_SCHEMA, Status, WgLaneMap, WgSmemMap};
use crate::wgmma::{ASource, RegFrag, THREADS, WgVariant, find};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// wgmma map folders read by default, relative to the repository root.
pub const DEFAULT_WGMMA_DIRS: [&str; 1] = ["reports/sm_90/wgmma"];
/// The headers' folder, under the header folder.
pub const SUBDIR: &str = "wgmma";
/// The shared-memory header.
pub const SMEM_HEADER: &str = "fp4probe_wgmma_smem.cuh";
/// The header that includes every wgmma header.
pub const UMBRELLA_HEADER: &str = "fp4probe_wgmma.cuh";
/// The generated Rust module, beside the mma.sync one.
pub const RUST_FILE: &str = "wgmma.rs";

/// Families without a committed lane map that get a header all the same, from the closed
/// forms their accumulator type's maps share (the wide tiles `--verify` runs; their maps are
/// not committed, for size).
pub const CLOSED_FORM_FAMILIES: [&str; 2] =
    ["m64n256k16.f32.bf16.bf16", "m64n256k32.f32.e4m3.e4m3"];

/// One lane map chosen as a source.
#[derive(Clone, Debug)]
pub struct WgSource {
    /// As the headers name it: relative to the root, `/`-separated.
    pub path: String,
    pub map: WgLaneMap,
    pub variant: WgVariant,
}

/// One register table and the maps that measured it.
#[derive(Clone, Debug)]
pub struct Table {
    /// `d.f32.n16`, `a.bf16.k16`.
    pub key: String,
    pub data: OperandData,
    /// The maps (paths) that gave this table, each agreeing slot for slot.
    pub sources: Vec<String>,
    /// Their variants.
    pub variants: Vec<String>,
    /// `device NVIDIA H200, compute capability 9.0, driver 13.0, fp4probe 0.1.0` of the first.
    pub measured_on: String,
}

impl Table {
    pub fn header_name(&self) -> String {
        format!("{}.cuh", self.key)
    }
    pub fn namespace(&self) -> String {
        super::cpp_name(&self.key)
    }
}

/// Where a family's D or A comes from.
#[derive(Clone, Debug)]
pub enum Part {
    /// A measured table (its key).
    Table(String),
    /// No table of this family: the closed form every table of the same type has (in
    /// `data`, with this family's operand geometry), and the keys of those tables.
    ClosedForm {
        from: Vec<String>,
        data: Box<OperandData>,
    },
}

/// One (type set, N) family: the `ss` and `rs` forms of one opcode.
#[derive(Clone, Debug)]
pub struct Family {
    /// `m64n16k16.f32.bf16.bf16`.
    pub stem: String,
    pub ss: WgVariant,
    pub rs: Option<WgVariant>,
    /// The lane maps of this family.
    pub maps: Vec<String>,
    pub d: Part,
    pub a: Option<Part>,
}

impl Family {
    pub fn header_name(&self) -> String {
        format!("{}.cuh", self.stem)
    }
    pub fn namespace(&self) -> String {
        super::cpp_name(&self.stem)
    }
}

/// Everything the wgmma outputs are made from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub lane_maps: Vec<WgSource>,
    pub smem: Vec<form::Derived>,
    pub d_tables: Vec<Table>,
    pub a_tables: Vec<Table>,
    pub families: Vec<Family>,
    /// Every file read (for the outputs' never-overwrite check).
    pub inputs: Vec<PathBuf>,
}

/// The family stem of a variant: its id without the A source.
pub fn family_stem(v: &WgVariant) -> String {
    let id = v.id();
    id[..id.len() - 3].to_string()
}

pub fn d_key(v: &WgVariant) -> String {
    format!("d.{}.n{}", v.d, v.n)
}

pub fn a_key(v: &WgVariant) -> String {
    format!("a.{}.k{}", v.a, v.a_k())
}

/// The schema a JSON record declares.
#[derive(serde::Deserialize)]
struct Schema {
    schema: String,
}

/// One operand's tables from a map's register slots.
fn reg_operand(op: Operand, f: &RegFrag, rm: &RegMap, path: &str) -> Result<OperandData> {
    let frag = Fragment {
        elem: f.elem,
        container_bits: f.elem_bits,
        reg_bits: 32,
        regs: f.regs,
        rows: f.rows,
        cols: f.cols,
    };
    if rm.regs != f.regs || rm.elems_per_reg != f.elems_per_reg || rm.slots.len() != f.slots() {
        bail!(
            "{path}: operand {} has {} slots in {} registers, the variant {} in {}",
            op.name(),
            rm.slots.len(),
            rm.regs,
            f.slots(),
            f.regs
        );
    }
    let mut row = vec![0u32; f.slots()];
    let mut col = vec![0u32; f.slots()];
    let mut seen = vec![false; f.slots()];
    for &[t, reg, e, r, c] in &rm.slots {
        if t >= THREADS || reg >= f.regs || e >= f.elems_per_reg || r >= f.rows || c >= f.cols {
            bail!(
                "{path}: operand {} slot (thread {t}, reg {reg}, elem {e}) -> ({r}, {c}) is out of range",
                op.name()
            );
        }
        let i = f.index(t, reg, e);
        seen[i] = true;
        row[i] = r;
        col[i] = c;
    }
    let mut slot = vec![u32::MAX; (f.rows * f.cols) as usize];
    for i in 0..f.slots() {
        slot[(row[i] * f.cols + col[i]) as usize] = i as u32;
    }
    if seen.contains(&false) || slot.contains(&u32::MAX) {
        bail!("{path}: operand {} is not a bijection", op.name());
    }
    let space = SlotSpace {
        regs: f.regs,
        elems_per_reg: f.elems_per_reg,
    };
    let coords: Vec<Coord> = row
        .iter()
        .zip(&col)
        .map(|(&row, &col)| Coord { row, col })
        .collect();
    let cf = fit_slots(op, space, THREADS, (f.rows, f.cols), &coords);
    let closed_form = super::closed_form(&cf, &space, &row, &col);
    Ok(OperandData {
        op,
        frag,
        lanes: THREADS,
        elems_per_reg: f.elems_per_reg,
        value_bits: f.elem_bits,
        value_shift: 0,
        row,
        col,
        slot,
        closed_form,
        cute: cf.cute,
    })
}

/// An operand's geometry without tables: for a family with no map, whose coordinates come
/// from a closed form.
fn geometry(op: Operand, f: &RegFrag, form: (Formula, Formula)) -> OperandData {
    OperandData {
        op,
        frag: Fragment {
            elem: f.elem,
            container_bits: f.elem_bits,
            reg_bits: 32,
            regs: f.regs,
            rows: f.rows,
            cols: f.cols,
        },
        lanes: THREADS,
        elems_per_reg: f.elems_per_reg,
        value_bits: f.elem_bits,
        value_shift: 0,
        row: Vec::new(),
        col: Vec::new(),
        slot: Vec::new(),
        closed_form: Ok(form),
        cute: None,
    }
}

fn measured_on(m: &WgLaneMap) -> String {
    let p = &m.provenance;
    let mut d = vec![format!("device {}", p.device)];
    if let Some(cc) = &p.compute_capability {
        d.push(format!("compute capability {cc}"));
    }
    if let Some(dr) = &p.driver {
        d.push(format!("driver {dr}"));
    }
    d.push(format!("fp4probe {}", p.tool_version));
    d.join(", ")
}

/// Add `data` (from `src`) to the table `key`, or check it against the table already there.
fn add_table(
    tables: &mut BTreeMap<String, Table>,
    key: String,
    data: OperandData,
    src: &WgSource,
) -> Result<()> {
    match tables.get_mut(&key) {
        Some(t) => {
            if t.data.row != data.row || t.data.col != data.col {
                bail!(
                    "{} and {} measured different {} tables for {key}",
                    t.sources[0],
                    src.path,
                    data.op.name()
                );
            }
            t.sources.push(src.path.clone());
            t.variants.push(src.variant.id());
        }
        None => {
            tables.insert(
                key.clone(),
                Table {
                    key,
                    data,
                    sources: vec![src.path.clone()],
                    variants: vec![src.variant.id()],
                    measured_on: measured_on(&src.map),
                },
            );
        }
    }
    Ok(())
}

/// The closed form every table in `tables` whose key starts with `prefix` shares.
fn shared_form(
    tables: &BTreeMap<String, Table>,
    prefix: &str,
) -> Result<(Formula, Formula, Vec<String>)> {
    let mut found: Option<(Formula, Formula)> = None;
    let mut from = Vec::new();
    for t in tables.values().filter(|t| t.key.starts_with(prefix)) {
        let (r, c) = t
            .data
            .closed_form
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{}: no closed form: {e}", t.key))?;
        if let Some((r0, c0)) = &found
            && (r0.text() != r.text() || c0.text() != c.text())
        {
            bail!("{} and {} have different closed forms", from[0], t.key);
        }
        found = Some((r.clone(), c.clone()));
        from.push(t.key.clone());
    }
    let (r, c) = found.with_context(|| format!("no measured table {prefix}*"))?;
    Ok((r, c, from))
}

/// Read every wgmma map folder: lane maps and studies, hardware and passed only (codegen
/// writes measured layouts); everything else is a note.
pub fn select(opts: &Options, notes: &mut Vec<String>) -> Result<Sources> {
    let mut s = Sources::default();
    let mut by_variant: BTreeMap<String, WgSource> = BTreeMap::new();
    let mut studies: BTreeMap<String, form::Derived> = BTreeMap::new();
    for dir in &opts.wgmma_dirs {
        let abs = opts.resolve(dir);
        let entries = std::fs::read_dir(&abs)
            .with_context(|| format!("cannot read wgmma map folder {}", abs.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let shown = opts.display(&file);
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("cannot read {shown}"))?;
            let Ok(schema) = serde_json::from_str::<Schema>(&text) else {
                continue;
            };
            if schema.schema == LANEMAP_SCHEMA {
                let map: WgLaneMap = serde_json::from_str(&text).with_context(|| shown.clone())?;
                if map.backend != BackendKind::Hardware || map.status != Status::Passed {
                    notes.push(format!(
                        "skipped {shown}: codegen takes passed hardware maps only"
                    ));
                    continue;
                }
                let variant = find(&map.variant).with_context(|| {
                    format!("{shown}: {} is not in the wgmma catalog", map.variant)
                })?;
                s.inputs.push(file.clone());
                by_variant.entry(variant.id()).or_insert(WgSource {
                    path: shown,
                    map,
                    variant,
                });
            } else if schema.schema == SMEM_SCHEMA {
                let map: WgSmemMap = serde_json::from_str(&text).with_context(|| shown.clone())?;
                if map.backend != BackendKind::Hardware {
                    notes.push(format!(
                        "skipped {shown}: codegen takes hardware studies only"
                    ));
                    continue;
                }
                match form::derive(&map, &shown) {
                    Ok(d) => {
                        s.inputs.push(file.clone());
                        studies.entry(d.form.stem()).or_insert(d);
                    }
                    Err(e) => notes.push(format!("skipped {shown}: {e}")),
                }
            }
        }
    }
    let mut d_tables = BTreeMap::new();
    let mut a_tables = BTreeMap::new();
    for src in by_variant.values() {
        let v = &src.variant;
        let reg = |name: &str| src.map.registers.iter().find(|r| r.operand == name);
        let d = reg("D").with_context(|| format!("{}: no D registers", src.path))?;
        add_table(
            &mut d_tables,
            d_key(v),
            reg_operand(Operand::D, &v.d_frag(), d, &src.path)?,
            src,
        )?;
        if v.a_src == ASource::Rs {
            let a = reg("A").with_context(|| format!("{}: no A registers", src.path))?;
            add_table(
                &mut a_tables,
                a_key(v),
                reg_operand(Operand::A, &v.a_frag(), a, &src.path)?,
                src,
            )?;
        }
    }
    // Families: every one with a map, and the closed-form ones.
    let mut stems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for src in by_variant.values() {
        stems
            .entry(family_stem(&src.variant))
            .or_default()
            .push(src.path.clone());
    }
    for f in CLOSED_FORM_FAMILIES {
        stems.entry(f.to_string()).or_default();
    }
    for (stem, maps) in stems {
        let ss = find(&format!("{stem}.ss"))
            .with_context(|| format!("{stem}.ss is not in the catalog"))?;
        let rs = find(&format!("{stem}.rs"));
        let d = if d_tables.contains_key(&d_key(&ss)) {
            Part::Table(d_key(&ss))
        } else {
            match shared_form(&d_tables, &format!("d.{}.", ss.d)) {
                Ok((r, c, from)) => Part::ClosedForm {
                    from,
                    data: Box::new(geometry(Operand::D, &ss.d_frag(), (r, c))),
                },
                Err(e) => {
                    notes.push(format!("no header for {stem}: {e:#}"));
                    continue;
                }
            }
        };
        let a = rs.as_ref().and_then(|rs| {
            a_tables
                .contains_key(&a_key(rs))
                .then(|| Part::Table(a_key(rs)))
        });
        s.families.push(Family {
            stem,
            ss,
            rs,
            maps,
            d,
            a,
        });
    }
    s.lane_maps = by_variant.into_values().collect();
    s.smem = studies.into_values().collect();
    s.d_tables = d_tables.into_values().collect();
    s.a_tables = a_tables.into_values().collect();
    Ok(s)
}

/// Every f32 accumulator table with every float A table whose handoff (`handoff::derive`)
/// keeps each element in its thread: the pairs a kernel chains (attention's P·V).
pub fn handoffs(s: &Sources) -> Vec<(&Table, &Table, handoff::Handoff)> {
    use crate::formats::ElemType;
    let mut out = Vec::new();
    for d in s
        .d_tables
        .iter()
        .filter(|t| t.data.frag.elem == ElemType::F32)
    {
        for a in &s.a_tables {
            let float = matches!(
                a.data.frag.elem,
                ElemType::F16 | ElemType::Bf16 | ElemType::E4m3 | ElemType::E5m2
            );
            if !float || !d.data.frag.cols.is_multiple_of(a.data.frag.cols) {
                continue;
            }
            if let Ok(h) = handoff::derive(&d.data, &a.data, THREADS) {
                out.push((d, a, h));
            }
        }
    }
    out
}

/// Render every wgmma file: the headers (under `out_dir/wgmma`) and the Rust module (beside
/// `rust_path`).
pub fn render(s: &Sources, opts: &Options, out_dir: &std::path::Path) -> Result<Vec<OutFile>> {
    let dir = out_dir.join(SUBDIR);
    let mut files = Vec::new();
    let mut push = |path: PathBuf, text: String| {
        let shown = opts.display(&path);
        files.push(OutFile { path, shown, text });
    };
    push(
        dir.join(SMEM_HEADER),
        cpp::smem_header(&s.smem, &opts.command),
    );
    for t in s.d_tables.iter().chain(&s.a_tables) {
        push(
            dir.join(t.header_name()),
            cpp::table_header(t, &opts.command),
        );
    }
    for f in &s.families {
        push(
            dir.join(f.header_name()),
            cpp::family_header(f, s, &opts.command)?,
        );
    }
    for (d, a, h) in handoffs(s) {
        push(
            dir.join(cpp::handoff_name(d, a)),
            cpp::handoff_header(d, a, &h, &opts.command),
        );
    }
    push(
        dir.join(UMBRELLA_HEADER),
        cpp::umbrella_header(s, &opts.command),
    );
    let rust_path = opts.resolve(&opts.rust_path).with_file_name(RUST_FILE);
    push(rust_path, rust::module(s, &opts.command)?);
    Ok(files)
}
