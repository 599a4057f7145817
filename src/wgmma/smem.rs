//! Shared-memory layouts: closed forms fitted to measured maps, and the descriptor sweeps that
//! say what LBO, SBO and the base offset do under each swizzle mode and major-ness.
//!
//! A fitted form is `addr(row, col) = X_p(start + origin + Σ weight_b · bit_b)`: the element's
//! absolute bit address is an integer-linear function of the bits of its row and column, put
//! through an XOR pattern X_p (address bits [4, 4+s) ^= (bits [7, 7+s) − p) mod 2^s,
//! s = 0..3). The fit tries each X and each phase offset p, undoes X_p (it is its own inverse:
//! it reads bits it does not change), and keeps those under which the whole map is linear.
//! Nothing is assumed about which X or p the descriptor's fields should give.

use super::desc::{Desc, Major, Swizzle};
use super::model::swizzle;
use super::probe::{Setting, SmemEntry, WgOutcome, probe};
use super::{ASource, WgVariant, backend::WgBackend};
use anyhow::Result;
use serde::{Deserialize, Serialize};

/// The weight of one coordinate bit, in bytes (fractions for sub-byte elements).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Weight {
    /// `row` or `col` (A: row = m, col = k; B: row = k, col = n).
    pub coord: String,
    pub bit: u32,
    pub bytes: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmemFit {
    /// The XOR pattern that makes the map linear.
    pub xor: Swizzle,
    /// What the pattern's row phase subtracts from address bits [7, 7+s), mod 2^s (0: the
    /// address bits as they are).
    #[serde(default)]
    pub phase_offset: u32,
    /// Byte offset of element (0, 0) from the descriptor's start, before the XOR.
    pub origin: f64,
    pub weights: Vec<Weight>,
    /// The form as text: `byte = X(start + ...) - start`.
    pub formula: String,
    /// Every XOR pattern under which the map is linear with some phase offset (the tile
    /// cannot tell them apart).
    pub fits_under: Vec<Swizzle>,
}

fn bits_needed(max: u32) -> u32 {
    u32::BITS - max.leading_zeros()
}

/// Fit `entries` (one per element, positions from the descriptor's start) of `bits`-bit
/// elements; `start` is the descriptor's start from the 1024-byte-aligned base.
pub fn fit(entries: &[SmemEntry], start: u32) -> Option<SmemFit> {
    let max_row = entries.iter().map(|e| e.row).max()?;
    let max_col = entries.iter().map(|e| e.col).max()?;
    let (rb, cb) = (bits_needed(max_row), bits_needed(max_col));
    let mut fits: Vec<SmemFit> = Vec::new();
    let candidates = Swizzle::ALL
        .into_iter()
        .flat_map(|x| (0..x.width() / 16).map(move |p| (x, p)));
    'pattern: for (x, phase) in candidates {
        let lin = |e: &SmemEntry| -> i64 {
            let abs = start as i64 + e.byte;
            if abs < 0 {
                return i64::MIN;
            }
            let u = swizzle(abs as u32, x, phase) as i64 - start as i64;
            u * 8 + e.bit as i64
        };
        let at = |row: u32, col: u32| entries.iter().find(|e| e.row == row && e.col == col);
        let origin = lin(at(0, 0)?);
        let mut w = Vec::new();
        for (coord, nb) in [("row", rb), ("col", cb)] {
            for b in 0..nb {
                let e = if coord == "row" {
                    at(1 << b, 0)
                } else {
                    at(0, 1 << b)
                };
                let Some(e) = e else { continue 'pattern };
                w.push((coord, b, lin(e) - origin));
            }
        }
        for e in entries {
            let mut want = origin;
            for &(coord, b, wt) in &w {
                let c = if coord == "row" { e.row } else { e.col };
                if c >> b & 1 == 1 {
                    want += wt;
                }
            }
            if lin(e) != want {
                continue 'pattern;
            }
        }
        let weights: Vec<Weight> = w
            .iter()
            .map(|&(coord, bit, wt)| Weight {
                coord: coord.into(),
                bit,
                bytes: wt as f64 / 8.0,
            })
            .collect();
        let formula = formula(x, phase, origin as f64 / 8.0, &weights);
        fits.push(SmemFit {
            xor: x,
            phase_offset: phase,
            origin: origin as f64 / 8.0,
            weights,
            formula,
            fits_under: Vec::new(),
        });
    }
    let mut under: Vec<Swizzle> = fits.iter().map(|f| f.xor).collect();
    under.dedup();
    let set_bits = |f: &SmemFit| -> u32 {
        f.weights
            .iter()
            .map(|w| ((w.bytes * 8.0) as i64).unsigned_abs().count_ones())
            .sum()
    };
    // Element (0, 0) at the start with no negative weights first (the same map written
    // around a wrong phase needs both), then the simplest weights, no phase offset, and the
    // narrower pattern.
    let irregular = |f: &SmemFit| {
        f.weights.iter().filter(|w| w.bytes < 0.0).count() + usize::from(f.origin != 0.0)
    };
    let mut best = fits
        .into_iter()
        .min_by_key(|f| (irregular(f), set_bits(f), f.phase_offset, f.xor))?;
    best.fits_under = under;
    Some(best)
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// Write the weights as terms, a run of bits whose weights double grouped into one:
/// `16·(row%8) + 1024·(row/8) + 2·col`.
fn formula(x: Swizzle, phase: u32, origin: f64, weights: &[Weight]) -> String {
    let mut terms = Vec::new();
    if origin != 0.0 {
        terms.push(num(origin));
    }
    let mut i = 0;
    while i < weights.len() {
        let w0 = &weights[i];
        let mut j = i;
        while j + 1 < weights.len()
            && weights[j + 1].coord == w0.coord
            && weights[j + 1].bit == weights[j].bit + 1
            && weights[j + 1].bytes == 2.0 * weights[j].bytes
        {
            j += 1;
        }
        if w0.bytes != 0.0 {
            let (lo, hi) = (w0.bit, weights[j].bit + 1);
            let var = match (lo, hi) {
                (0, _) if j + 1 == weights.len() || weights[j + 1].coord != w0.coord => {
                    w0.coord.clone()
                }
                (0, h) => format!("({}%{})", w0.coord, 1u64 << h),
                (l, h) if j + 1 == weights.len() || weights[j + 1].coord != w0.coord => {
                    let _ = h;
                    format!("({}/{})", w0.coord, 1u64 << l)
                }
                (l, h) => format!("({}/{}%{})", w0.coord, 1u64 << l, 1u64 << (h - l)),
            };
            terms.push(format!("{}·{var}", num(w0.bytes)));
        }
        i = j + 1;
    }
    let body = if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" + ")
    };
    match (x, phase) {
        (Swizzle::None, _) => format!("byte = {body}"),
        (_, 0) => format!("byte = xor{}(start + {body}) - start", x.name()),
        (_, p) => format!(
            "byte = xor{}(start + {body}) - start, XOR phase = address bits [7, {}) − {p}",
            x.name(),
            7 + (x.width() / 16).trailing_zeros()
        ),
    }
}

/// One point of a sweep: the setting, what it measured, the fits of A and B.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// What changed from the packed setting: `packed`, `LBO×2` (with `, SBO×4` where the
    /// stride alone would overlap tiles), `SBO×2`, `start+256`, `start+256, base offset 2`,
    /// `base offset 2`, and so on.
    pub label: String,
    pub setting: Setting,
    pub passed: bool,
    pub failure: Option<String>,
    pub a_fit: Option<SmemFit>,
    pub b_fit: Option<SmemFit>,
}

/// The settings a study sweeps for one (swizzle, major-ness).
pub fn sweep_settings(v: &WgVariant, sw: Swizzle, major: Major) -> Vec<(String, Setting)> {
    let base = Setting::packed(v, sw, major, major);
    let with = |f: &dyn Fn(&mut Desc)| {
        let mut s = base;
        f(&mut s.a_desc);
        f(&mut s.b_desc);
        s
    };
    // A doubled stride can land one group of core matrices on the next group along the other
    // field; that field then doubles too (or quadruples), so that every point is a layout in
    // which no two elements share a byte.
    let doubled = |name: &str, other: &str, field: fn(&mut Desc) -> &mut u32| {
        let other_field: fn(&mut Desc) -> &mut u32 = if name == "LBO" {
            |d| &mut d.sbo
        } else {
            |d| &mut d.lbo
        };
        [1, 2, 4]
            .into_iter()
            .map(|o| {
                let s = with(&|d| {
                    *field(d) *= 2;
                    *other_field(d) *= o;
                });
                let label = match o {
                    1 => format!("{name}×2"),
                    o => format!("{name}×2, {other}×{o}"),
                };
                (label, s)
            })
            .find(|(_, s)| distinct(v, s))
    };
    let mut out = vec![("packed".to_string(), base)];
    out.extend(doubled("LBO", "SBO", |d| &mut d.lbo));
    out.extend(doubled("SBO", "LBO", |d| &mut d.sbo));
    if sw != Swizzle::None {
        // Where the XOR's row phase comes from: the start off the 1024-byte repeat, then the
        // base offset field at several values, with the start aligned and off it.
        out.push(("start+256".to_string(), with(&|d| d.start += 256)));
        for b in 1..=3 {
            out.push((
                format!("start+256, base offset {b}"),
                with(&|d| {
                    d.start += 256;
                    d.base_offset = b;
                }),
            ));
        }
        out.push(("base offset 2".to_string(), with(&|d| d.base_offset = 2)));
    }
    out
}

/// Whether the documented layout gives every element of A and B its own address.
fn distinct(v: &WgVariant, s: &Setting) -> bool {
    let bits = v.elem_bits();
    let tile = |major: Major, d: &Desc, mn: u32, k: u32| {
        let mut seen = std::collections::HashSet::new();
        (0..mn).all(|i| {
            (0..k).all(|j| {
                seen.insert(super::model::element_bit_addr(
                    major, d, d.swizzle, bits, i, j,
                ))
            })
        })
    };
    tile(s.a_major, &s.a_desc, super::M, v.a_k()) && tile(s.b_major, &s.b_desc, v.n, v.k)
}

/// Run one setting and fit both operands' maps.
pub fn point(
    backend: &dyn WgBackend,
    v: &WgVariant,
    label: &str,
    setting: &Setting,
    seed: u64,
) -> Result<(SweepPoint, WgOutcome)> {
    let out = probe(backend, v, setting, seed)?;
    let l = setting.launch(v);
    let (a_fit, b_fit) = match &out.layout {
        Ok(lay) => (
            lay.a_smem.as_ref().and_then(|a| fit(a, l.a_desc.start)),
            fit(&lay.b_smem, l.b_desc.start),
        ),
        Err(_) => (None, None),
    };
    let passed = out.layout.is_ok() && out.validation.as_ref().is_some_and(|x| x.passed());
    Ok((
        SweepPoint {
            label: label.into(),
            setting: *setting,
            passed,
            failure: out.layout.as_ref().err().cloned(),
            a_fit,
            b_fit,
        },
        out,
    ))
}

/// The variant a study of `bits`-bit elements runs: A and B in shared memory, m64n64, and
/// m64n128 for 16-bit elements: their MN-major 128B rows hold 64 elements, so only a B tile
/// wider than 64 shows where the next 64 go (what LBO does there).
pub fn study_variant(bits: u32) -> WgVariant {
    let id = match bits {
        16 => "m64n128k16.f32.bf16.bf16.ss",
        32 => "m64n64k8.f32.tf32.tf32.ss",
        8 => "m64n64k32.f32.e4m3.e4m3.ss",
        _ => "m64n64k256.s32.b1.b1.and.popc.ss",
    };
    let v = super::find(id).expect("study variants are in the catalog");
    debug_assert_eq!(v.a_src, ASource::Ss);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_name_the_documented_forms() {
        let v = study_variant(16);
        let s = Setting::packed(&v, Swizzle::None, Major::K, Major::K);
        let emu = crate::wgmma::emulator::WgEmulator::new();
        let (p, _) = point(&emu, &v, "packed", &s, 1).unwrap();
        assert!(p.passed);
        let a = p.a_fit.unwrap();
        assert_eq!(a.xor, Swizzle::None);
        assert_eq!(
            a.formula,
            "byte = 16·(row%8) + 256·(row/8) + 2·(col%8) + 128·(col/8)"
        );
        let s = Setting::packed(&v, Swizzle::B128, Major::K, Major::K);
        let (p, _) = point(&emu, &v, "packed", &s, 1).unwrap();
        let a = p.a_fit.unwrap();
        assert_eq!(a.xor, Swizzle::B128);
        assert_eq!(a.formula, "byte = xor128B(start + 128·row + 2·col) - start");
    }

    #[test]
    fn every_sweep_point_gives_each_element_its_own_byte() {
        for bits in [16, 32, 8, 1] {
            let v = study_variant(bits);
            let majors: &[Major] = if v.transposable() {
                &[Major::K, Major::MN]
            } else {
                &[Major::K]
            };
            for &m in majors {
                for sw in Swizzle::ALL {
                    for (label, s) in sweep_settings(&v, sw, m) {
                        assert!(distinct(&v, &s), "{bits}-bit {m} {sw} {label}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_fit_names_the_phase_the_base_offset_takes_away() {
        let v = study_variant(16);
        let emu = crate::wgmma::emulator::WgEmulator::new();
        for (sw, b, want) in [
            (Swizzle::B128, 3, 3),
            (Swizzle::B64, 3, 3),
            (Swizzle::B64, 2, 2),
            (Swizzle::B32, 2, 0),
            (Swizzle::B32, 1, 1),
        ] {
            let mut s = Setting::packed(&v, sw, Major::K, Major::K);
            s.a_desc.start += 256;
            s.a_desc.base_offset = b;
            s.b_desc = s.a_desc;
            let (p, _) = point(&emu, &v, "t", &s, 1).unwrap();
            assert!(p.passed, "{sw} {b}");
            let a = p.a_fit.unwrap();
            assert_eq!(
                (a.xor, a.phase_offset, a.origin),
                (sw, want, 0.0),
                "{sw} {b}"
            );
            // The same linear part as the packed tile: only the phase moved.
            let packed = Setting::packed(&v, sw, Major::K, Major::K);
            let (q, _) = point(&emu, &v, "packed", &packed, 1).unwrap();
            assert_eq!(a.weights, q.a_fit.unwrap().weights, "{sw} {b}");
        }
    }
}
