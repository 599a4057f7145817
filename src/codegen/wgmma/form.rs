//! A shared-memory study (`fp4probe.wgmma-smem/1`) as one [`SmemForm`]: what each coordinate
//! bit of a tile adds to an element's offset, as a constant plus multiples of LBO and SBO.
//!
//! Each passing sweep point of a study fits `byte = X(start + Σ weight_b · bit_b) − start`
//! (see `wgmma::smem::fit`). The points differ in LBO, SBO and the start address, so a bit's
//! weight across them is solved as `c + l·LBO + s·SBO`: points that change LBO alone give `l`,
//! SBO alone `s`, both together whichever is still missing; every point (the start+256 one
//! too) must then agree. A field no passing point changed is pinned at the packed tile's
//! value: the form says nothing about other values of it. A point with a non-zero base offset is
//! used where both tiles fit the same XOR pattern with the base offset as its row phase (the
//! form then takes the base offset as a parameter); otherwise its forms are quoted, not used. The form is checked against
//! every byte of the study's packed maps of A and B before it is returned.

use super::tables::{Axis, SmemForm, SmemTerm};
use crate::wgmma::desc::{Desc, Swizzle};
use crate::wgmma::map::WgSmemMap;
use crate::wgmma::smem::SmemFit;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A derived form and what the header says about it.
#[derive(Clone, Debug)]
pub struct Derived {
    pub form: SmemForm,
    /// Other XOR patterns every used point also fits under.
    pub also_fits: Vec<Swizzle>,
    /// The sweep points the form rests on (labels).
    pub points: Vec<String>,
    /// `label: A form; B form` of the points with a non-zero base offset the form does not
    /// reproduce.
    pub base_offset_points: Vec<String>,
    /// The packed tile's descriptors (A, B).
    pub packed: (Desc, Desc),
    /// The device and command the study names.
    pub device: String,
    pub command: String,
}

/// (c, l, s): a weight in bits as `c + l·LBO + s·SBO`, LBO and SBO in bytes.
type Lin = (i64, i64, i64);
/// The weight in bits of each (axis, bit).
type Weights = BTreeMap<(Axis, u32), i64>;
/// One sweep point of one operand: its LBO, SBO and weights.
type Point = (u32, u32, Weights);
/// Every bit's (c, l, s), and whether LBO and SBO were determined.
type Solution = (BTreeMap<(Axis, u32), Lin>, bool, bool);

/// Weight in bits of each (axis, bit) of one operand's fit.
fn weights(fit: &SmemFit, row_axis: Axis) -> Weights {
    let col_axis = if row_axis == Axis::Mn {
        Axis::K
    } else {
        Axis::Mn
    };
    fit.weights
        .iter()
        .map(|w| {
            let axis = if w.coord == "row" { row_axis } else { col_axis };
            ((axis, w.bit), (w.bytes * 8.0).round() as i64)
        })
        .collect()
}

/// Solve every bit's (c, l, s) from `points` ((LBO, SBO, weights) each, the packed point
/// first). Returns the solution and whether LBO and SBO were determined.
fn solve(points: &[Point]) -> Result<Solution, String> {
    let (l0, s0, w0) = &points[0];
    let (l0, s0) = (*l0 as i64, *s0 as i64);
    let mut out = BTreeMap::new();
    let (mut l_known, mut s_known) = (false, false);
    for (&key, &base) in w0 {
        let mut l: Option<i64> = None;
        let mut s: Option<i64> = None;
        let diffs: Vec<(i64, i64, i64)> = points[1..]
            .iter()
            .map(|(li, si, wi)| {
                (
                    *li as i64 - l0,
                    *si as i64 - s0,
                    wi.get(&key).copied().unwrap_or(0) - base,
                )
            })
            .collect();
        let div = |num: i64, den: i64| -> Result<i64, String> {
            if num % den != 0 {
                return Err(format!(
                    "{} bit {}: a weight change of {num} bits is not a whole multiple of the \
                     field change {den}",
                    key.0.name(),
                    key.1
                ));
            }
            Ok(num / den)
        };
        // Two passes: a point that changes both fields needs one of them solved first.
        for _ in 0..2 {
            for &(dl, ds, dw) in &diffs {
                match (dl != 0, ds != 0, l, s) {
                    (true, false, None, _) => l = Some(div(dw, dl)?),
                    (false, true, _, None) => s = Some(div(dw, ds)?),
                    (true, true, Some(lv), None) => s = Some(div(dw - lv * dl, ds)?),
                    (true, true, None, Some(sv)) => l = Some(div(dw - sv * ds, dl)?),
                    _ => {}
                }
            }
        }
        l_known = l.is_some();
        s_known = s.is_some();
        let (l, s) = (l.unwrap_or(0), s.unwrap_or(0));
        let c = base - l * l0 - s * s0;
        for (i, &(dl, ds, dw)) in diffs.iter().enumerate() {
            if l * dl + s * ds != dw {
                return Err(format!(
                    "{} bit {}: sweep point {} does not fit c + l·LBO + s·SBO",
                    key.0.name(),
                    key.1,
                    i + 1
                ));
            }
        }
        out.insert(key, (c, l, s));
    }
    Ok((out, l_known, s_known))
}

/// Group the bits of each axis into runs whose weights double; the run that ends at the
/// highest measured bit of its axis is unbounded.
fn terms(lin: &BTreeMap<(Axis, u32), Lin>) -> Vec<SmemTerm> {
    let mut out = Vec::new();
    for axis in [Axis::Mn, Axis::K] {
        let bits: Vec<(u32, Lin)> = lin
            .iter()
            .filter(|((a, _), _)| *a == axis)
            .map(|(&(_, b), &w)| (b, w))
            .collect();
        let top = bits.iter().map(|&(b, _)| b).max();
        let mut i = 0;
        while i < bits.len() {
            let (lo, w) = bits[i];
            if w == (0, 0, 0) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j + 1 < bits.len()
                && bits[j + 1].0 == bits[j].0 + 1
                && bits[j + 1].1 == (2 * bits[j].1.0, 2 * bits[j].1.1, 2 * bits[j].1.2)
            {
                j += 1;
            }
            let hi = bits[j].0;
            out.push(SmemTerm {
                axis,
                lo,
                len: if Some(hi) == top { 0 } else { hi - lo + 1 },
                c: w.0,
                lbo: w.1,
                sbo: w.2,
            });
            i = j + 1;
        }
    }
    out
}

/// The form of study `m` (read from `path`, as the header names it).
pub fn derive(m: &WgSmemMap, path: &str) -> Result<Derived, String> {
    if m.status != crate::wgmma::map::Status::Passed {
        return Err("the study failed".into());
    }
    let packed = m.sweep.first().ok_or("the study has no sweep points")?;
    if !packed.passed {
        return Err("its packed point failed".into());
    }
    let (Some(pa), Some(pb)) = (&packed.a_fit, &packed.b_fit) else {
        return Err("its packed maps fit no form".into());
    };
    let xor = pa.xor;
    if pb.xor != xor {
        return Err(format!(
            "A fits under {} and B under {}",
            pa.xor.name(),
            pb.xor.name()
        ));
    }
    let base0 = (
        packed.setting.a_desc.base_offset,
        packed.setting.b_desc.base_offset,
    );
    let mut used = Vec::new();
    let mut base_offset_points = Vec::new();
    let mut base_offsets = std::collections::BTreeSet::from([base0.0]);
    // A point with another base offset is used where both tiles fit the same pattern with the
    // base offset as the row phase (what the XOR subtracts from address bits [7, 7+s)).
    let phase_mask = xor.width() / 16 - 1;
    let phase_is = |f: &Option<SmemFit>, base_offset: u32| {
        f.as_ref().is_some_and(|f| {
            f.xor == xor && f.origin == 0.0 && f.phase_offset == base_offset & phase_mask
        })
    };
    for p in m.sweep.iter().filter(|p| p.passed) {
        let (da, db) = (&p.setting.a_desc, &p.setting.b_desc);
        if (da.base_offset, db.base_offset) != base0
            && da.base_offset == db.base_offset
            && base0.0 == 0
            && phase_is(&p.a_fit, da.base_offset)
            && phase_is(&p.b_fit, db.base_offset)
        {
            base_offsets.insert(da.base_offset);
            used.push(p);
            continue;
        }
        if (da.base_offset, db.base_offset) != base0 {
            let show = |f: &Option<SmemFit>| {
                f.as_ref()
                    .map_or("fits no form".to_string(), |f| f.formula.clone())
            };
            base_offset_points.push(format!(
                "{} (A and B base offset {}, {}): A {}; B {}",
                p.label,
                da.base_offset,
                db.base_offset,
                show(&p.a_fit),
                show(&p.b_fit)
            ));
            continue;
        }
        if phase_is(&p.a_fit, 0) && phase_is(&p.b_fit, 0) {
            used.push(p);
        }
    }
    for p in m.sweep.iter().filter(|p| !p.passed) {
        let b = p.setting.a_desc.base_offset;
        if b != base0.0 {
            base_offset_points.push(format!("{}: failed", p.label));
        }
    }
    let also_fits: Vec<Swizzle> = Swizzle::ALL
        .into_iter()
        .filter(|&x| x != xor)
        .filter(|x| {
            used.iter().all(|p| {
                [&p.a_fit, &p.b_fit]
                    .iter()
                    .all(|f| f.as_ref().is_some_and(|f| f.fits_under.contains(x)))
            })
        })
        .collect();
    // A's rows are mn (m), B's rows are k.
    let solve_op = |which: char| {
        let pts: Vec<Point> = used
            .iter()
            .map(|p| {
                let (d, f, axis) = if which == 'A' {
                    (&p.setting.a_desc, p.a_fit.as_ref(), Axis::Mn)
                } else {
                    (&p.setting.b_desc, p.b_fit.as_ref(), Axis::K)
                };
                (d.lbo, d.sbo, weights(f.expect("used points fit"), axis))
            })
            .collect();
        solve(&pts).map_err(|e| format!("{which}: {e}"))
    };
    let (mut lin_a, la, sa) = solve_op('A')?;
    let (lin_b, lb, sb) = solve_op('B')?;
    // A and B share one form: equal weights where both measured a bit; a bit only one tile
    // reaches (B's mn past A's 64 rows) comes from that tile.
    for (key, w) in lin_b {
        if *lin_a.entry(key).or_insert(w) != w {
            return Err("A and B give different forms in (mn, k)".into());
        }
    }
    if (la, sa) != (lb, sb) {
        return Err("A and B tell LBO and SBO apart differently".into());
    }
    let (a0, b0) = (packed.setting.a_desc, packed.setting.b_desc);
    if (!la && a0.lbo != b0.lbo) || (!sa && a0.sbo != b0.sbo) {
        return Err(
            "the packed A and B descriptors differ in a field no sweep point varied".into(),
        );
    }
    let extent = |axis: Axis| {
        let mut max = 0;
        for (rows, row_axis) in [(&m.a, Axis::Mn), (&m.b, Axis::K)] {
            for e in rows.iter() {
                let (r, c) = (e[2] as u32, e[3] as u32);
                let v = if axis == row_axis { r } else { c };
                max = max.max(v);
            }
        }
        max + 1
    };
    let form = SmemForm {
        elem_bits: m.elem_bits,
        major: m.major,
        swizzle: m.swizzle,
        xor,
        terms: Cow::Owned(terms(&lin_a)),
        measured_mn: extent(Axis::Mn),
        measured_k: extent(Axis::K),
        pinned_lbo: (!la).then_some(a0.lbo),
        pinned_sbo: (!sa).then_some(a0.sbo),
        base_offsets: Cow::Owned(base_offsets.into_iter().collect()),
        source: Cow::Owned(path.to_string()),
    };
    // Every byte of the packed maps, as measured.
    for (rows, desc, row_is_mn) in [(&m.a, &a0, true), (&m.b, &b0, false)] {
        // B's start is its region's, past A's.
        let start = if row_is_mn {
            desc.start
        } else {
            desc.start + b_region(m)
        };
        for e in rows.iter() {
            let (r, c) = (e[2] as u32, e[3] as u32);
            let (mn, k) = if row_is_mn { (r, c) } else { (c, r) };
            let got = form.bit_offset(mn, k, desc.lbo, desc.sbo, start, desc.base_offset);
            let want = e[0] * 8 + e[1];
            if got != want {
                return Err(format!(
                    "the form gives bit {got} for (mn {mn}, k {k}) of {}, the map bit {want}",
                    if row_is_mn { "A" } else { "B" }
                ));
            }
        }
    }
    Ok(Derived {
        form,
        also_fits,
        points: used.iter().map(|p| p.label.clone()).collect(),
        base_offset_points,
        packed: (a0, b0),
        device: m.provenance.device.clone(),
        command: m.provenance.command.clone(),
    })
}

/// Where the probe put B's region: the next 1024-byte boundary past A's tile (a multiple of
/// 1024, so it does not change what the XOR sees; kept for exactness).
fn b_region(m: &WgSmemMap) -> u32 {
    let v = crate::wgmma::find(&m.variant);
    match (v, m.sweep.first()) {
        (Some(v), Some(p)) => p.setting.launch(&v).b_off,
        _ => 0,
    }
}

/// What LBO or SBO does in `form`, in words, from its terms.
pub fn field_meaning(form: &SmemForm, lbo: bool) -> String {
    let (name, pinned) = if lbo {
        ("LBO", form.pinned_lbo)
    } else {
        ("SBO", form.pinned_sbo)
    };
    if let Some(p) = pinned {
        return format!(
            "{name}: not measured (no passing sweep point changed it); the form holds for \
             {name} = {p} bytes, the packed tile's"
        );
    }
    let uses: Vec<String> = form
        .terms
        .iter()
        .filter(|t| if lbo { t.lbo != 0 } else { t.sbo != 0 })
        .map(|t| {
            let coef = if lbo { t.lbo } else { t.sbo };
            let times = if coef == 8 {
                String::new()
            } else if coef % 8 == 0 {
                format!("{}·", coef / 8)
            } else {
                format!("{coef}/8·")
            };
            format!(
                "{times}{name} bytes per step of {}{}",
                t.axis.name(),
                if t.lo == 0 {
                    String::new()
                } else {
                    format!("/{}", 1u64 << t.lo)
                }
            )
        })
        .collect();
    if uses.is_empty() {
        format!("{name}: no effect on the measured tile (changing it moved no element)")
    } else {
        format!("{name}: {}", uses.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(lbo: u32, sbo: u32, w: &[((Axis, u32), i64)]) -> Point {
        (lbo, sbo, w.iter().copied().collect())
    }

    #[test]
    fn weights_split_into_constants_lbo_and_sbo() {
        // 16·(mn%8) + SBO·(mn/8) + 2·(k%8) + LBO·(k/8), in bits, at the sweep's three points:
        // packed (128, 256), LBO×2 with SBO×4 (256, 1024), SBO×2 (128, 512).
        let at = |lbo: i64, sbo: i64| {
            vec![
                ((Axis::Mn, 0), 128),
                ((Axis::Mn, 3), 8 * sbo),
                ((Axis::Mn, 4), 16 * sbo),
                ((Axis::K, 0), 16),
                ((Axis::K, 3), 8 * lbo),
            ]
        };
        let pts = [
            point(128, 256, &at(128, 256)),
            point(256, 1024, &at(256, 1024)),
            point(128, 512, &at(128, 512)),
        ];
        let (lin, l, s) = solve(&pts).unwrap();
        assert!(l && s);
        assert_eq!(lin[&(Axis::Mn, 0)], (128, 0, 0));
        assert_eq!(lin[&(Axis::Mn, 4)], (0, 0, 16));
        assert_eq!(lin[&(Axis::K, 3)], (0, 8, 0));
        let t = terms(&lin);
        assert_eq!(t.len(), 4);
        // The highest run of each axis is unbounded; the others keep their width.
        assert_eq!(
            (t[0].axis, t[0].lo, t[0].len, t[0].c),
            (Axis::Mn, 0, 1, 128)
        );
        assert_eq!(
            (t[1].axis, t[1].lo, t[1].len, t[1].sbo),
            (Axis::Mn, 3, 0, 8)
        );
        assert_eq!((t[3].axis, t[3].lo, t[3].len, t[3].lbo), (Axis::K, 3, 0, 8));
    }

    #[test]
    fn a_field_no_point_changes_stays_unknown() {
        let pts = [
            point(1024, 128, &[((Axis::Mn, 3), 1024), ((Axis::K, 3), 8192)]),
            point(2048, 128, &[((Axis::Mn, 3), 1024), ((Axis::K, 3), 16384)]),
        ];
        let (lin, l, s) = solve(&pts).unwrap();
        assert!(l && !s);
        assert_eq!(lin[&(Axis::K, 3)], (0, 8, 0));
        assert_eq!(lin[&(Axis::Mn, 3)], (1024, 0, 0));
        // A point that fits no c + l·LBO + s·SBO is refused.
        let bad = [
            point(128, 256, &[((Axis::K, 3), 1024)]),
            point(256, 256, &[((Axis::K, 3), 1024 + 4)]),
        ];
        assert!(solve(&bad).is_err());
    }
}
