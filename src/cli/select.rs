//! Choosing variants from the command line: by catalog id, or by any of its qualifiers.

use crate::formats::ElemType;
use crate::isa::{BitOp, Kind, Shape, Variant, catalog};
use anyhow::{Result, bail};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct VariantArgs {
    /// Catalog id, as `fp4probe catalog` prints it (`::` may be written `_`), or the PTX
    /// instruction as written in a kernel (`mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`;
    /// qualifiers in any order, operands ignored).
    #[arg(long, conflicts_with_all = ["shape", "kind", "a", "b", "c", "d", "scale_vec", "stype", "op", "sparse"])]
    pub variant: Option<String>,
    /// Shape, e.g. m16n8k32.
    #[arg(long)]
    pub shape: Option<Shape>,
    /// kind qualifier: plain, f8f6f4, mxf8f6f4, mxf4, mxf4nvf4.
    #[arg(long)]
    pub kind: Option<Kind>,
    /// A element type (f16, bf16, tf32, f64, s8, u8, s4, u4, b1, e4m3, e5m2, e3m2, e2m3, e2m1).
    #[arg(long)]
    pub a: Option<ElemType>,
    /// B element type.
    #[arg(long)]
    pub b: Option<ElemType>,
    /// C (accumulator input) type.
    #[arg(long)]
    pub c: Option<ElemType>,
    /// D (result) type.
    #[arg(long)]
    pub d: Option<ElemType>,
    /// Block-scale vector size: 1, 2 or 4 (scale_vec::NX).
    #[arg(long)]
    pub scale_vec: Option<u32>,
    /// Scale type: ue8m0 or ue4m3.
    #[arg(long)]
    pub stype: Option<ElemType>,
    /// b1 operation: and or xor.
    #[arg(long, value_parser = parse_op)]
    pub op: Option<BitOp>,
    /// Only .satfinite integer variants (or, with =false, only those without).
    #[arg(long)]
    pub satfinite: Option<bool>,
    /// Only sparse `mma.sp` variants (or, with =false, only dense ones).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub sparse: Option<bool>,
    /// Every variant in the catalog (with qualifiers: every variant they match, which is what
    /// qualifiers select anyway).
    #[arg(long)]
    pub all: bool,
}

fn parse_op(s: &str) -> Result<BitOp, String> {
    match s {
        "and" | "and.popc" => Ok(BitOp::And),
        "xor" | "xor.popc" => Ok(BitOp::Xor),
        _ => Err(format!("unknown b1 operation '{s}' (and, xor)")),
    }
}

impl VariantArgs {
    fn matches(&self, v: &Variant) -> bool {
        self.shape.is_none_or(|s| s == v.shape)
            && self.kind.is_none_or(|k| k == v.kind)
            && self.a.is_none_or(|t| t == v.a)
            && self.b.is_none_or(|t| t == v.b)
            && self.c.is_none_or(|t| t == v.c)
            && self.d.is_none_or(|t| t == v.d)
            && self
                .scale_vec
                .is_none_or(|x| v.scale.is_some_and(|s| s.vec == x))
            && self
                .stype
                .is_none_or(|x| v.scale.is_some_and(|s| s.stype == x))
            && self.op.is_none_or(|o| v.bitop == Some(o))
            && self.satfinite.is_none_or(|s| s == v.satfinite)
            && self.sparse.is_none_or(|s| s == v.sparse.is_some())
    }

    pub fn any_qualifier(&self) -> bool {
        self.shape.is_some()
            || self.kind.is_some()
            || self.a.is_some()
            || self.b.is_some()
            || self.c.is_some()
            || self.d.is_some()
            || self.scale_vec.is_some()
            || self.stype.is_some()
            || self.op.is_some()
            || self.satfinite.is_some()
            || self.sparse.is_some()
    }

    /// The variants asked for: the one `--variant` names, every variant the qualifiers match,
    /// or (`--all` alone) the whole catalog; in each case only what the probes run. A variant
    /// named that they do not run is an error with the reason; in a selection such variants
    /// are left out with a note on stderr, and a selection of nothing else is an error.
    pub fn select(&self) -> Result<Vec<Variant>> {
        self.select_by(Variant::not_probed)
    }

    /// [`Self::select`] for `fragment`, which also measures the sparse forms.
    pub fn select_lane_mapped(&self) -> Result<Vec<Variant>> {
        self.select_by(Variant::not_lane_mapped)
    }

    fn select_by(&self, why_not: fn(&Variant) -> Option<&'static str>) -> Result<Vec<Variant>> {
        if let Some(id) = &self.variant {
            return match crate::isa::find(id) {
                Some(v) => match why_not(&v) {
                    None => Ok(vec![v]),
                    Some(why) => bail!(
                        "{} is catalogued (ptxas assembles it) but not probed: {why}",
                        v.id()
                    ),
                },
                None => bail!(
                    "'{id}' is not in the catalog; give a catalog id or the PTX instruction as \
                     written (`fp4probe catalog` lists every id, `fp4probe catalog --rejected` \
                     spellings ptxas refuses)"
                ),
            };
        }
        if !self.all && !self.any_qualifier() {
            bail!(
                "name a variant (--variant ID or PTX text, or --shape/--kind/--a/--b/...), or pass \
                 --all"
            );
        }
        let found: Vec<Variant> = catalog().into_iter().filter(|v| self.matches(v)).collect();
        if found.is_empty() {
            bail!("no catalog variant matches; `fp4probe catalog` lists them");
        }
        let (probed, skipped): (Vec<Variant>, Vec<Variant>) =
            found.into_iter().partition(|v| why_not(v).is_none());
        if !skipped.is_empty() {
            let note = not_probed_note(&skipped, why_not);
            if probed.is_empty() {
                bail!("no selected variant is probed: {note}");
            }
            eprintln!("note: left out {note}");
        }
        Ok(probed)
    }

    /// How `variants` (a selection of several) could be narrowed: each qualifier on which they
    /// differ, with the values they take, e.g. `--a e4m3|e5m2`.
    pub fn narrowing(variants: &[Variant]) -> Vec<String> {
        use std::collections::BTreeSet;
        let mut out = Vec::new();
        // "-" stands for "no such qualifier": it cannot be passed, but its presence means that
        // naming any value narrows the selection.
        let mut add = |flag: &str, mut values: BTreeSet<String>| {
            let some_lack_it = values.remove("-");
            if values.len() > 1 || (some_lack_it && !values.is_empty()) {
                out.push(format!(
                    "{flag} {}",
                    values.into_iter().collect::<Vec<_>>().join("|")
                ));
            }
        };
        let col = |f: &dyn Fn(&Variant) -> String| variants.iter().map(f).collect();
        add("--shape", col(&|v| v.shape.to_string()));
        add(
            "--kind",
            col(&|v| v.kind.ptx().unwrap_or("plain").to_string()),
        );
        add("--a", col(&|v| v.a.to_string()));
        add("--b", col(&|v| v.b.to_string()));
        add("--c", col(&|v| v.c.to_string()));
        add("--d", col(&|v| v.d.to_string()));
        add(
            "--scale-vec",
            col(&|v| v.scale.map(|s| s.vec.to_string()).unwrap_or("-".into())),
        );
        add(
            "--stype",
            col(&|v| v.scale.map(|s| s.stype.to_string()).unwrap_or("-".into())),
        );
        add("--satfinite", col(&|v| v.satfinite.to_string()));
        add("--sparse", col(&|v| v.sparse.is_some().to_string()));
        add(
            "--op",
            col(&|v| match v.bitop {
                Some(BitOp::And) => "and".into(),
                Some(BitOp::Xor) => "xor".into(),
                None => "-".into(),
            }),
        );
        out
    }
}

/// `N catalogued variants the probes do not run (`fp4probe catalog` lists them):` and one line
/// per reason with its count.
fn not_probed_note(skipped: &[Variant], why_not: fn(&Variant) -> Option<&'static str>) -> String {
    let mut why: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in skipped {
        *why.entry(why_not(v).unwrap_or_default()).or_default() += 1;
    }
    let mut s = format!(
        "{} variants that are catalogued (ptxas assembles them) but not probed:",
        skipped.len()
    );
    for (reason, n) in why {
        s += &format!("\n  {n} x {reason}");
    }
    s
}

/// The instruction family a command works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// `mma.sync`, one warp.
    Mma,
    /// `wgmma.mma_async`, one warpgroup (sm_90a).
    Wgmma,
}

/// `--family` and the wgmma selection beside [`VariantArgs`].
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FamilyArgs {
    /// Instruction family: mma (mma.sync) or wgmma (wgmma.mma_async, sm_90a). Default mma, or
    /// wgmma when --variant names a wgmma catalog id (`m64n256k16.f32.bf16.bf16.ss`).
    #[arg(long, value_enum)]
    pub family: Option<Family>,
    /// wgmma: every dense variant whose id contains this text (`f32.e4m3.e4m3`, `m64n16k`).
    #[arg(long)]
    pub filter: Option<String>,
}

impl FamilyArgs {
    /// The family asked for: `--family`, else wgmma when `--variant` is a wgmma id and not an
    /// mma.sync one, else mma.
    pub fn family(&self, select: &VariantArgs) -> Family {
        if let Some(f) = self.family {
            return f;
        }
        match &select.variant {
            Some(id) if crate::isa::find(id).is_none() && crate::wgmma::find(id).is_some() => {
                Family::Wgmma
            }
            _ => Family::Mma,
        }
    }

    /// The mma.sync selection; refuses the wgmma-only `--filter`.
    pub fn mma_variants(&self, select: &VariantArgs) -> Result<Vec<Variant>> {
        if self.filter.is_some() {
            bail!("--filter selects wgmma variants: add --family wgmma");
        }
        select.select()
    }

    /// [`Self::mma_variants`] with the sparse forms too (`sass`, whose probe kernel is
    /// `fragment`'s).
    pub fn lane_mapped_variants(&self, select: &VariantArgs) -> Result<Vec<Variant>> {
        if self.filter.is_some() {
            bail!("--filter selects wgmma variants: add --family wgmma");
        }
        select.select_lane_mapped()
    }

    /// The dense wgmma variants `--variant`, `--filter` and `--all` name; the mma.sync
    /// qualifiers (`--shape`, `--a`, ...) are refused.
    pub fn wgmma_variants(&self, select: &VariantArgs) -> Result<Vec<crate::wgmma::WgVariant>> {
        if select.any_qualifier() {
            bail!(
                "--shape/--kind/--a/--b/--c/--d/--scale-vec/--stype/--op/--satfinite select \
                 mma.sync variants; for wgmma give --variant ID, --filter TEXT or --all"
            );
        }
        let ids: Vec<String> = select.variant.iter().cloned().collect();
        pick_wgmma(&ids, self.filter.as_deref(), select.all)
    }
}

/// Dense wgmma variants: each id in `ids`, then (with `all` or a `filter`) every dense catalog
/// variant whose id contains `filter`; an unknown id, a sparse form or an empty selection is an
/// error naming it.
pub fn pick_wgmma(
    ids: &[String],
    filter: Option<&str>,
    all: bool,
) -> Result<Vec<crate::wgmma::WgVariant>> {
    let mut out = Vec::new();
    for text in ids {
        let Some(v) = crate::wgmma::find(text) else {
            bail!(
                "'{text}' is not a wgmma variant (see `fp4probe catalog --family wgmma`; ids look \
                 like m64n256k16.f32.bf16.bf16.ss)"
            );
        };
        if v.sparse {
            bail!("{}: the sparse forms are catalogued, not probed", v.id());
        }
        out.push(v);
    }
    if all || filter.is_some() {
        out.extend(
            crate::wgmma::catalog()
                .into_iter()
                .filter(|v| !v.sparse && filter.is_none_or(|f| v.id().contains(f))),
        );
    }
    // A variant named twice is probed once: its files are written by one thread.
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(v.id()));
    if out.is_empty() {
        match filter {
            Some(f) => bail!("no dense wgmma variant's id contains '{f}'"),
            None => bail!("nothing selected: give --variant ID, --filter TEXT or --all"),
        }
    }
    Ok(out)
}
