//! Preparation of the wgmma bench (CPU only): every kernel of a [`WgPlan`] built with
//! `crate::wgmma::bench::wg_bench_kernel`, assembled, disassembled and put through
//! `check_wg_loop`.

use super::sass::{CheckStatus, SassCheck};
use super::toolchain::Toolchain;
use crate::isa::Target;
use crate::wgmma::WgVariant;
use crate::wgmma::bench::{Layout, WgShape, check_wg_loop, unfit, wg_bench_kernel};
use serde::{Deserialize, Serialize};

/// What to build: the latency kernel and one throughput kernel per (warpgroups, chains).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgPlan {
    pub warpgroups: Vec<u32>,
    pub chains: Vec<u32>,
    /// wgmma per commit group of the throughput kernels.
    pub per_group: u32,
    /// Groups left in flight after each commit in the throughput kernels (at least 1).
    pub in_flight: u32,
    /// Dependent wgmma per loop iteration of the latency kernel.
    pub latency_steps: u32,
    pub layout: Layout,
}

impl Default for WgPlan {
    fn default() -> Self {
        WgPlan {
            warpgroups: vec![1, 2, 3],
            chains: vec![1, 2],
            per_group: 4,
            in_flight: 1,
            latency_steps: 8,
            layout: Layout::Swizzle128,
        }
    }
}

impl WgPlan {
    /// The latency shape, then every throughput shape in (warpgroups, chains) order.
    pub fn shapes(&self) -> Vec<WgShape> {
        let mut out = vec![WgShape::latency(self.latency_steps, self.layout)];
        for &w in &self.warpgroups {
            for &c in &self.chains {
                out.push(WgShape::throughput(
                    w,
                    c,
                    self.per_group,
                    self.in_flight.max(1),
                    self.layout,
                ));
            }
        }
        out
    }
}

/// One bench kernel, assembled and checked (or not built, `skipped` saying why).
#[derive(Clone, Debug)]
pub struct WgKernel {
    pub shape: WgShape,
    pub ptx: String,
    pub cubin: Option<Vec<u8>>,
    /// What ptxas printed (its advisories).
    pub ptxas_log: String,
    pub check: SassCheck,
    pub skipped: Option<String>,
}

/// Everything about one variant that needs no GPU.
#[derive(Clone, Debug)]
pub struct WgPrepared {
    pub variant: WgVariant,
    pub target: Target,
    pub toolchain: Option<Toolchain>,
    /// The latency kernel first, then the throughput kernels.
    pub kernels: Vec<WgKernel>,
}

impl WgPrepared {
    pub fn latency(&self) -> &WgKernel {
        &self.kernels[0]
    }
    pub fn throughput(&self) -> &[WgKernel] {
        &self.kernels[1..]
    }
    /// Every kernel that was built passed the guard.
    pub fn all_verified(&self) -> bool {
        self.kernels
            .iter()
            .filter(|k| k.skipped.is_none())
            .all(|k| k.check.status == CheckStatus::Verified)
    }
}

/// Build and check one kernel.
pub fn build_wg_kernel(
    v: &WgVariant,
    target: Target,
    tc: Option<&Toolchain>,
    shape: WgShape,
) -> WgKernel {
    let ptx = wg_bench_kernel(v, target, shape);
    let body = shape.wgmma_per_iter();
    let mut k = WgKernel {
        shape,
        ptx,
        cubin: None,
        ptxas_log: String::new(),
        check: SassCheck::unverified(body, "not built"),
        skipped: None,
    };
    if let Some(why) = unfit(v, shape) {
        k.check = SassCheck::unverified(body, format!("not built: {why}"));
        k.skipped = Some(why);
        return k;
    }
    let Some(tc) = tc else {
        k.check = SassCheck::unverified(body, "no ptxas to assemble the kernel with");
        return k;
    };
    let (cubin, log) = match tc.assemble_logged(&k.ptx, target) {
        Ok(x) => x,
        Err(e) => {
            k.check = SassCheck::unverified(body, format!("{} failed: {e}", tc.describe()));
            return k;
        }
    };
    k.check = match tc.sass(&cubin) {
        Ok(text) => check_wg_loop(&text, &log, v, shape),
        Err(e) => SassCheck::unverified(body, format!("no SASS: {e:#}")),
    };
    k.cubin = Some(cubin);
    k.ptxas_log = log;
    k
}

/// [`build_wg_kernel`] every kernel of `plan` for every variant, on `jobs` threads (ptxas and the
/// disassembler are separate processes). Results in the order given.
pub fn prepare_wgmma(
    variants: &[WgVariant],
    target: Target,
    tc: Option<&Toolchain>,
    plan: &WgPlan,
    jobs: usize,
) -> Vec<WgPrepared> {
    let shapes = plan.shapes();
    let work: Vec<(usize, usize)> = (0..variants.len())
        .flat_map(|v| (0..shapes.len()).map(move |s| (v, s)))
        .collect();
    let mut built = crate::threads::map_on_threads(&work, jobs, |&(v, sh)| {
        build_wg_kernel(&variants[v], target, tc, shapes[sh])
    })
    .into_iter();
    variants
        .iter()
        .map(|v| WgPrepared {
            variant: v.clone(),
            target,
            toolchain: tc.cloned(),
            kernels: built.by_ref().take(shapes.len()).collect(),
        })
        .collect()
}
