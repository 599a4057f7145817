//! Near misses of `ldmatrix`, `stmatrix` and `movmatrix` that ptxas rejects, in the form of
//! `isa::Rejected` (its module declares `%p` and `%r<8>` for them).

use crate::isa::Rejected;
use crate::isa::rejected::entry;

pub fn rejected_spellings() -> Vec<Rejected> {
    vec![
        entry(
            "ldmatrix.sync.aligned.m16n16.x2.shared::cta.b8 {%r0, %r1, %r2, %r3}, [%p];",
            "sm_100a",
            "Modifier '.trans' require for instruction ldmatrix with shape '.m16n16'",
            "ldmatrix.sync.aligned.m16n16.x2.trans.shared::cta.b8: m16n16 loads transposed only",
        ),
        entry(
            "ldmatrix.sync.aligned.m16n16.x4.trans.shared::cta.b8 \
             {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%p];",
            "sm_100a",
            "Incorrect no. of matrix: 4 for ldmatrix with shape '.m16n16'",
            "m16n16 is .x1 (2 registers) or .x2 (4 registers)",
        ),
        entry(
            "ldmatrix.sync.aligned.m16n16.x1.trans.shared::cta.b8 {%r0}, [%p];",
            "sm_100a",
            "Vector of size 2 is expected for argument 0 of instruction 'ldmatrix'",
            "a 16x16 matrix of bytes is 2 registers per lane",
        ),
        entry(
            "ldmatrix.sync.aligned.m16n16.x1.trans.shared::cta.b16 {%r0, %r1}, [%p];",
            "sm_100a",
            "Incorrect instruction type specified for ldmatrix with shape '.m16n16'",
            "m16n16 holds bytes: .b8, .b8x16.b6x16_p32 or .b8x16.b4x16_p64",
        ),
        entry(
            "ldmatrix.sync.aligned.m8n8.x1.shared::cta.b8 {%r0}, [%p];",
            "sm_100a",
            "Incorrect instruction type specified for ldmatrix with shape '.m8n8'",
            "m8n8 is .b16; 8-bit elements load as m16n16 (.trans) or, unpacked from 6 or 4 bits, \
             as m8n16",
        ),
        entry(
            "ldmatrix.sync.aligned.m8n16.x1.trans.shared::cta.b8x16.b6x16_p32 {%r0}, [%p];",
            "sm_100a",
            "Modifier .trans not allowed for shape '.m8n16'",
            "m8n16 loads untransposed only; transposed 6-bit data is m16n16.x1.trans",
        ),
        entry(
            "ldmatrix.sync.aligned.m8n16.x1.shared::cta.b8 {%r0}, [%p];",
            "sm_100a",
            "Unexpected number of instruction types specified for ldmatrix with shape '.m8n16'",
            "m8n16 unpacks: .b8x16.b6x16_p32 or .b8x16.b4x16_p64",
        ),
        entry(
            "ldmatrix.sync.aligned.m16n16.x1.trans.shared::cta.b8 {%r0, %r1}, [%p];",
            "sm_120",
            "Feature '.m16n16' not supported on .target 'sm_120'",
            "an arch-specific target: sm_100a, sm_103a, sm_110a, sm_120a or sm_121a (or the \
             family targets sm_100f, sm_120f)",
        ),
        entry(
            "ldmatrix.sync.aligned.m8n8.x1.global.b16 {%r0}, [%p];",
            "sm_90",
            "State space incorrect for instruction 'ldmatrix'",
            "ldmatrix reads shared memory of the CTA: .shared, .shared::cta or a generic address",
        ),
        entry(
            "stmatrix.sync.aligned.m8n8.x1.shared::cta.b16 [%p], {%r0};",
            "sm_89",
            "Feature 'stmatrix' requires .target sm_90 or higher",
            ".target sm_90 or later (ldmatrix is sm_75)",
        ),
        entry(
            "stmatrix.sync.aligned.m16n8.x1.shared::cta.b8 [%p], {%r0};",
            "sm_100a",
            "Modifier '.trans' require for instruction stmatrix with shape '.m16n8'",
            "stmatrix.sync.aligned.m16n8.x1.trans.shared::cta.b8: m16n8 stores transposed only",
        ),
        entry(
            "stmatrix.sync.aligned.m16n16.x1.trans.shared::cta.b8 [%p], {%r0};",
            "sm_100a",
            "Illegal matrix shape '.m16n16' for instruction 'stmatrix'",
            "stmatrix is m8n8 (.b16) or m16n8 (.trans .b8)",
        ),
        entry(
            "stmatrix.sync.aligned.m8n8.x1.shared::cta.b8x16.b6x16_p32 [%p], {%r0};",
            "sm_100a",
            "Unexpected instruction types specified for 'stmatrix'",
            "stmatrix stores .b16 or .b8; only ldmatrix unpacks 6- and 4-bit data",
        ),
        entry(
            "movmatrix.sync.aligned.m8n8.b16 %r0, %r1;",
            "sm_90",
            ".trans modifier required for instruction 'movmatrix'",
            "movmatrix.sync.aligned.m8n8.trans.b16: movmatrix only transposes",
        ),
        entry(
            "movmatrix.sync.aligned.m8n8.trans.b8 %r0, %r1;",
            "sm_100a",
            "Unexpected instruction types specified for 'movmatrix'",
            "movmatrix moves one 8x8 matrix of .b16",
        ),
    ]
}
