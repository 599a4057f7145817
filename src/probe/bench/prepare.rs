//! Preparation (CPU only): PTX, cubin, lowering and SASS check per chain count.

use super::kernel::{KernelShape, bench_kernel};
use super::sass::{CheckStatus, Lowering, SassCheck, check_loop, lowering};
use super::toolchain::Toolchain;
use crate::isa::{ScaleSelectors, Target, Variant};
use crate::probe::ptx::fragment_kernel;

/// One bench kernel, assembled and checked.
#[derive(Clone, Debug)]
pub struct PreparedKernel {
    pub shape: KernelShape,
    pub ptx: String,
    /// The cubin the check read; `None` where there was no ptxas or it refused the module.
    pub cubin: Option<Vec<u8>>,
    pub check: SassCheck,
    /// Set when the first build (one A/B set per chain) was rejected because ptxas merged
    /// identical A·B products, and this kernel is the rebuild with distinct A/B per mma.sync.
    pub rebuilt: Option<String>,
}

/// Everything about one variant that needs no GPU.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub variant: Variant,
    pub target: Target,
    pub toolchain: Option<Toolchain>,
    pub lowering: Result<Lowering, String>,
    /// One per chain count, in the order asked (chain count 1 always included: the latency).
    pub kernels: Vec<PreparedKernel>,
}

impl Prepared {
    pub fn kernel(&self, chains: u32) -> Option<&PreparedKernel> {
        self.kernels.iter().find(|k| k.shape.chains == chains)
    }
}

fn build(
    v: &Variant,
    target: Target,
    tc: Option<&Toolchain>,
    per_mma: &Result<Lowering, String>,
    shape: KernelShape,
) -> PreparedKernel {
    let ptx = bench_kernel(v, target, shape);
    let body = shape.body_mmas();
    let Some(tc) = tc else {
        return PreparedKernel {
            shape,
            ptx,
            cubin: None,
            check: SassCheck::unverified(body, "no ptxas to assemble the kernel with"),
            rebuilt: None,
        };
    };
    let cubin = match tc.assemble(&ptx, target) {
        Ok(c) => c,
        Err(e) => {
            return PreparedKernel {
                shape,
                ptx,
                cubin: None,
                check: SassCheck::unverified(body, format!("{} failed: {e}", tc.describe())),
                rebuilt: None,
            };
        }
    };
    let check = match (per_mma, tc.sass(&cubin)) {
        (Err(why), _) => SassCheck::unverified(
            body,
            format!("the lowering of one mma.sync is unknown ({why})"),
        ),
        (_, Err(e)) => SassCheck::unverified(body, format!("no SASS: {e:#}")),
        (Ok(l), Ok(text)) => check_loop(&text, l.tensor_per_mma, body),
    };
    PreparedKernel {
        shape,
        ptx,
        cubin: Some(cubin),
        check,
        rebuilt: None,
    }
}

/// Assemble and check the bench kernels of `v` for `target`, one per chain count (plus chain
/// count 1 for the latency). Where ptxas merges identical A·B products (lowerings that add C
/// outside the tensor instruction, e.g. FP8 on sm_90), the kernel is rebuilt with distinct
/// A/B registers for every mma.sync of the loop body ([`KernelShape::distinct`]).
pub fn prepare(
    v: &Variant,
    target: Target,
    tc: Option<&Toolchain>,
    chains: &[u32],
    unroll: u32,
) -> Prepared {
    let per_mma: Result<Lowering, String> = match tc {
        None => Err("no ptxas".into()),
        Some(tc) => tc
            .assemble(
                &fragment_kernel(v, target, ScaleSelectors::default()),
                target,
            )
            .map_err(|e| format!("assembling the fragment kernel: {e}"))
            .and_then(|cubin| {
                tc.sass(&cubin)
                    .map_err(|e| format!("disassembling the fragment kernel: {e:#}"))
            })
            .and_then(|text| lowering(&text)),
    };
    let mut counts: Vec<u32> = vec![1];
    for &c in chains {
        if !counts.contains(&c) {
            counts.push(c);
        }
    }
    let kernels = counts
        .iter()
        .map(|&c| {
            let first = build(v, target, tc, &per_mma, KernelShape::new(c, unroll));
            let merged = first.check.status == CheckStatus::Rejected
                && first
                    .check
                    .found
                    .zip(first.check.expected)
                    .is_some_and(|(f, e)| f < e);
            if !merged {
                return first;
            }
            let mut second = build(v, target, tc, &per_mma, KernelShape::distinct(c, unroll));
            second.rebuilt = Some(format!(
                "with one A/B set per chain ({c} chains × {unroll} steps) the check failed: {}; \
                 rebuilt with distinct A/B for each of the {} mma.sync of the loop body",
                first.check.detail,
                second.shape.body_mmas()
            ));
            second
        })
        .collect();
    Prepared {
        variant: v.clone(),
        target,
        toolchain: tc.cloned(),
        lowering: per_mma,
        kernels,
    }
}

/// [`prepare`] for many variants on `jobs` threads (ptxas and the disassembler are separate
/// processes, so this scales with cores). Results in the order given.
pub fn prepare_all(
    items: &[(Variant, Target)],
    tc: Option<&Toolchain>,
    chains: &[u32],
    unroll: u32,
    jobs: usize,
) -> Vec<Prepared> {
    crate::threads::map_on_threads(items, jobs, |(v, t)| prepare(v, *t, tc, chains, unroll))
}
