//! What runs data-movement experiments: the GPU (the probe kernel of [`super::kernel`], one
//! warp per experiment) or the emulator. Both take the same [`Experiment`]s and give the same
//! [`Observed`], so the probe never knows which ran.

use super::kernel::{ENTRY, out_words, probe_kernel};
use super::{Experiment, LANES, Observed, TILE_ELEMS, dst_regs, not_probed, pack, src_regs};
use crate::device::DeviceInfo;
use crate::device::cuda::CudaBackend;
use crate::isa::matrix::MatrixVariant;
use anyhow::{Context, Result, bail};

pub trait MoveBackend: Sync {
    fn info(&self) -> &DeviceInfo;
    /// Ok if this backend runs `v`; otherwise an error naming what it needs.
    fn check_supported(&self, v: &MatrixVariant) -> Result<()>;
    /// Run every experiment, in order.
    fn run(&self, v: &MatrixVariant, xs: &[Experiment]) -> Result<Vec<Observed>>;
}

/// The kernel's inputs of one experiment: the byte offsets of the lanes' addresses, the tile
/// as words, the source registers (one word where there are none: the kernel takes a pointer).
fn inputs(v: &MatrixVariant, x: &Experiment) -> Result<[Vec<u32>; 3]> {
    if x.tile.len() != TILE_ELEMS || x.src.len() != (LANES * src_regs(v)) as usize {
        bail!(
            "{}: experiment with {} tile elements and {} source words, expected {TILE_ELEMS} \
             and {}",
            v.id(),
            x.tile.len(),
            x.src.len(),
            LANES * src_regs(v)
        );
    }
    let addr = x.addr_rows.iter().map(|r| r * super::ROW_BYTES).collect();
    let tile = x.tile.chunks(2).map(|p| pack(p[0], p[1])).collect();
    let src = if x.src.is_empty() {
        vec![0]
    } else {
        x.src.clone()
    };
    Ok([addr, tile, src])
}

/// The output words split into registers and tile.
fn observed(v: &MatrixVariant, words: &[u32]) -> Observed {
    let n = (LANES * dst_regs(v)) as usize;
    let tile = words[n..]
        .iter()
        .flat_map(|w| [super::half(*w, 0), super::half(*w, 1)])
        .collect();
    Observed {
        dst: words[..n].to_vec(),
        tile,
    }
}

impl MoveBackend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        crate::device::Backend::info(self)
    }

    fn check_supported(&self, v: &MatrixVariant) -> Result<()> {
        if let Some(why) = not_probed(v) {
            bail!("{}: {why}", v.id());
        }
        let (maj, min) = self.compute_capability();
        if !v.runs_on((maj, min)) {
            bail!(
                "{} requires {}; this device is {} (sm_{maj}{min})",
                v.id(),
                v.min_target,
                crate::device::Backend::info(self).name
            );
        }
        Ok(())
    }

    fn run(&self, v: &MatrixVariant, xs: &[Experiment]) -> Result<Vec<Observed>> {
        MoveBackend::check_supported(self, v)?;
        let module = self
            .load_ptx_module(&probe_kernel(v))
            .with_context(|| format!("loading the probe kernel of {}", v.id()))?;
        xs.iter()
            .enumerate()
            .map(|(i, x)| {
                let [addr, tile, src] = inputs(v, x)?;
                let words = self
                    .launch_one_warp(&module, ENTRY, &[&addr, &tile, &src], out_words(v))
                    .with_context(|| format!("running {} (experiment {i})", v.id()))?;
                Ok(observed(v, &words))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::matrix::find;

    #[test]
    fn inputs_and_outputs_round_trip_the_words() {
        let v = find("stmatrix.m8n8.x2.b16").unwrap();
        let x = Experiment {
            addr_rows: std::array::from_fn(|l| l as u32 * 2),
            tile: (0..TILE_ELEMS as u16).collect(),
            src: vec![7; 64],
        };
        let [addr, tile, src] = inputs(&v, &x).unwrap();
        assert_eq!(addr[3], 96);
        assert_eq!(tile[0], 0x0001_0000);
        assert_eq!(src.len(), 64);
        let o = observed(&v, &tile);
        assert!(o.dst.is_empty());
        assert_eq!(o.tile, x.tile);
        let bad = Experiment {
            src: vec![],
            ..x.clone()
        };
        assert!(inputs(&v, &bad).is_err());
    }
}
