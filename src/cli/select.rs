//! Choosing variants from the command line: by catalog id, or by any of its qualifiers.

use crate::formats::ElemType;
use crate::isa::{BitOp, Kind, Shape, Variant, catalog};
use anyhow::{Result, bail};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct VariantArgs {
    /// Catalog id, as `fp4probe catalog` prints it (`::` may be written `_`).
    #[arg(long, conflicts_with_all = ["shape", "kind", "a", "b", "c", "d", "scale_vec", "stype", "op"])]
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
    /// Every variant that matches (all of them if no qualifier is given).
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
    }

    fn any_qualifier(&self) -> bool {
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
    }

    /// The variants asked for: exactly one unless `--all`.
    pub fn select(&self) -> Result<Vec<Variant>> {
        if let Some(id) = &self.variant {
            return match crate::isa::find(id) {
                Some(v) => Ok(vec![v]),
                None => bail!(
                    "'{id}' is not in the catalog; `fp4probe catalog` lists every id, and `fp4probe catalog --rejected` spellings ptxas refuses"
                ),
            };
        }
        if !self.all && !self.any_qualifier() {
            bail!("name a variant (--variant ID, or --shape/--kind/--a/--b/...), or pass --all");
        }
        let found: Vec<Variant> = catalog().into_iter().filter(|v| self.matches(v)).collect();
        if found.is_empty() {
            bail!("no catalog variant matches; `fp4probe catalog` lists them");
        }
        if found.len() > 1 && !self.all {
            let list: Vec<String> = found.iter().map(|v| format!("  {}", v.id())).collect();
            bail!(
                "{} variants match; add qualifiers (e.g. --d, --c, --satfinite) or pass --all:\n{}",
                found.len(),
                list.join("\n")
            );
        }
        Ok(found)
    }
}
