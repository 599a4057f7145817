//! The probe kernel: one warpgroup per CTA runs one experiment through exactly one wgmma.
//!
//! CTA `e` zeroes its dynamic shared memory (so a byte the host did not place reads as zero),
//! copies experiment `e`'s A and B regions (raw bytes, placed by the host) to a 1024-byte-aligned
//! base, makes them visible to the async proxy, forms the descriptors from the host's templates
//! plus the base address, loads C into the accumulator registers and, for the `rs` form, A into
//! its registers, runs the wgmma and stores D as `[experiment][thread][register]` words.

use super::{ASource, Immediates, WgOperands, WgVariant};
use std::fmt::Write;

pub const ENTRY: &str = "fp4probe_wgmma";

/// The transpose immediates one kernel is built with (they are compile-time operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transpose {
    pub a: bool,
    pub b: bool,
}

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("%{prefix}{i}")).collect()
}

/// Emit a loop copying `%n` bytes from global `%g` to shared `%sbase + off_reg` in 16-byte
/// pieces strided over the 128 threads.
fn copy_loop(s: &mut String, label: &str, dst_off: &str) {
    writeln!(
        s,
        "    shl.b32 %i, %t, 4;
{label}:
    setp.ge.u32 %q, %i, %n;
    @%q bra {label}_DONE;
    cvt.u64.u32 %off, %i;
    add.u64 %ptr, %g, %off;
    ld.global.v4.b32 {{%v0, %v1, %v2, %v3}}, [%ptr];
    add.u32 %sa, %sbase, {dst_off};
    add.u32 %sa, %sa, %i;
    st.shared.v4.b32 [%sa], {{%v0, %v1, %v2, %v3}};
    add.u32 %i, %i, 2048;
    bra {label};
{label}_DONE:"
    )
    .unwrap();
}

/// PTX of the probe kernel for `v` with transposes `tr` (sparse forms are not probed).
pub fn probe_kernel(v: &WgVariant, tr: Transpose) -> String {
    assert!(!v.sparse, "the probe kernel runs dense wgmma only");
    let fd = v.d_frag();
    let fa = v.a_frag();
    let d = names("d", fd.regs);
    let a = names("a", fa.regs);
    let dty = v.d_reg_type();
    let mut s = String::new();
    writeln!(
        s,
        "// fp4probe wgmma probe: {}\n.version {}\n.target sm_90a\n.address_size 64\n",
        v.id(),
        v.ptx_version()
    )
    .unwrap();
    s += ".extern .shared .align 1024 .b8 fp4probe_smem[];\n\n";
    writeln!(
        s,
        ".visible .entry {ENTRY}(
    .param .u64 p_a, .param .u64 p_b, .param .u64 p_areg, .param .u64 p_c, .param .u64 p_d,
    .param .u64 p_adesc, .param .u64 p_bdesc,
    .param .u32 p_a_bytes, .param .u32 p_b_bytes, .param .u32 p_b_off,
    .param .u32 p_smem_bytes, .param .u32 p_scale_d)
{{
    .reg .b32 %t, %e, %sbase, %i, %n, %sa, %slot, %v<4>;
    .reg .b64 %g, %off, %ptr, %da, %db, %base64;
    .reg .pred %p, %q;
    .reg .{dty} {};
    .reg .b32 {};",
        d.join(", "),
        a.join(", ")
    )
    .unwrap();
    s += "    mov.u32 %t, %tid.x;
    mov.u32 %e, %ctaid.x;
    mov.u32 %sbase, fp4probe_smem;
    add.u32 %sbase, %sbase, 1023;
    and.b32 %sbase, %sbase, -1024;
    mov.b32 %v0, 0;
    mov.b32 %v1, 0;
    mov.b32 %v2, 0;
    mov.b32 %v3, 0;
    ld.param.u32 %n, [p_smem_bytes];
    shl.b32 %i, %t, 4;
ZERO:
    setp.ge.u32 %q, %i, %n;
    @%q bra ZERO_DONE;
    add.u32 %sa, %sbase, %i;
    st.shared.v4.b32 [%sa], {%v0, %v1, %v2, %v3};
    add.u32 %i, %i, 2048;
    bra ZERO;
ZERO_DONE:
    bar.sync 0;
";
    if v.a_src == ASource::Ss {
        s += "    ld.param.u32 %n, [p_a_bytes];
    ld.param.u64 %g, [p_a];
    cvta.to.global.u64 %g, %g;
    mul.wide.u32 %off, %e, %n;
    add.u64 %g, %g, %off;
    mov.u32 %slot, 0;
";
        copy_loop(&mut s, "COPY_A", "%slot");
    }
    s += "    ld.param.u32 %n, [p_b_bytes];
    ld.param.u64 %g, [p_b];
    cvta.to.global.u64 %g, %g;
    mul.wide.u32 %off, %e, %n;
    add.u64 %g, %g, %off;
    ld.param.u32 %slot, [p_b_off];
";
    copy_loop(&mut s, "COPY_B", "%slot");
    s += "    fence.proxy.async.shared::cta;
    bar.sync 0;
    cvt.u64.u32 %base64, %sbase;
    shr.u64 %base64, %base64, 4;
    ld.param.u64 %da, [p_adesc];
    add.u64 %da, %da, %base64;
    ld.param.u64 %db, [p_bdesc];
    add.u64 %db, %db, %base64;
    mad.lo.u32 %slot, %e, 128, %t;
";
    // C is read only when the wgmma adds it (scale-d): the other launches pass no C at all.
    let load = |s: &mut String, param: &str, regs: &[String], ty: &str, pred: &str| {
        writeln!(
            s,
            "    ld.param.u64 %g, [{param}];
    cvta.to.global.u64 %g, %g;
    mul.wide.u32 %off, %slot, {};
    add.u64 %ptr, %g, %off;",
            regs.len() * 4
        )
        .unwrap();
        for (i, r) in regs.iter().enumerate() {
            if !pred.is_empty() {
                writeln!(s, "    mov.b32 {r}, 0;").unwrap();
            }
            writeln!(s, "    {pred}ld.global.{ty} {r}, [%ptr+{}];", 4 * i).unwrap();
        }
    };
    s += "    ld.param.u32 %n, [p_scale_d];
    setp.ne.u32 %p, %n, 0;
";
    load(&mut s, "p_c", &d, dty, "@%p ");
    if v.a_src == ASource::Rs {
        load(&mut s, "p_areg", &a, "b32", "");
    }
    let ops = WgOperands {
        d: d.clone(),
        a: a.clone(),
        a_desc: "%da".into(),
        b_desc: "%db".into(),
        scale_d: "%p".into(),
        ..Default::default()
    };
    let imm = Immediates {
        trans_a: tr.a,
        trans_b: tr.b,
        ..Default::default()
    };
    writeln!(
        s,
        "    wgmma.fence.sync.aligned;
    {}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    ld.param.u64 %g, [p_d];
    cvta.to.global.u64 %g, %g;
    mul.wide.u32 %off, %slot, {};
    add.u64 %ptr, %g, %off;",
        v.instruction(&ops, imm),
        d.len() * 4
    )
    .unwrap();
    for (i, r) in d.iter().enumerate() {
        writeln!(s, "    st.global.{dty} [%ptr+{}], {r};", 4 * i).unwrap();
    }
    s += "    ret;\n}\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::find;

    /// The kernel text assembles for sm_90a with the pinned ptxas, for every type family, both
    /// A sources and the transposes (skipped, and said so, where no ptxas is installed).
    #[test]
    fn probe_kernels_assemble() {
        let Some(ptxas) = crate::tools::find_tool("ptxas") else {
            eprintln!("SKIPPED: no ptxas (run .ci/install-cuda-tools)");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        for (id, tr) in [
            (
                "m64n256k16.f32.bf16.bf16.ss",
                Transpose { a: true, b: true },
            ),
            ("m64n8k16.f16.f16.f16.rs", Transpose { a: false, b: true }),
            (
                "m64n24k8.f32.tf32.tf32.ss",
                Transpose { a: false, b: false },
            ),
            (
                "m64n64k32.f16.e4m3.e5m2.rs",
                Transpose { a: false, b: false },
            ),
            (
                "m64n256k32.satfinite.s32.u8.s8.ss",
                Transpose { a: false, b: false },
            ),
            (
                "m64n48k256.s32.b1.b1.and.popc.rs",
                Transpose { a: false, b: false },
            ),
        ] {
            let v = find(id).unwrap();
            let src = dir.path().join("k.ptx");
            std::fs::write(&src, probe_kernel(&v, tr)).unwrap();
            let out = std::process::Command::new(&ptxas)
                .args(["-arch=sm_90a", "-o"])
                .arg(dir.path().join("k.cubin"))
                .arg(&src)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{id}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
