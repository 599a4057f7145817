//! SASS: parsing, the timed loop, the lowering of one mma.sync, and the guard's verdict.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One SASS instruction as cuobjdump or nvdisasm prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassInstr {
    pub addr: u64,
    /// `@!P0` and the like.
    pub pred: Option<String>,
    /// Mnemonic with its modifiers: `HMMA.16816.F32.BF16`.
    pub opcode: String,
    pub operands: String,
}

impl SassInstr {
    /// The mnemonic without modifiers: `HMMA`.
    pub fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or("")
    }
    pub fn is_tensor(&self) -> bool {
        is_tensor_opcode(&self.opcode)
    }
    /// Predicated on the constant false predicate (`@!PT`, `@!UPT`): ptxas's padding, never
    /// executed.
    pub fn never_runs(&self) -> bool {
        matches!(self.pred.as_deref(), Some("@!PT" | "@!UPT"))
    }
    /// `/*0270*/ HMMA.16816.F32.BF16 R12, R4, R20, R12 ;`
    pub fn text(&self) -> String {
        let pred = self
            .pred
            .as_deref()
            .map(|p| format!("{p} "))
            .unwrap_or_default();
        let ops = if self.operands.is_empty() {
            String::new()
        } else {
            format!(" {}", self.operands)
        };
        format!("/*{:04x}*/ {pred}{}{ops} ;", self.addr, self.opcode)
    }
}

/// Tensor-core instructions: every mnemonic ending in `MMA` (HMMA, IMMA, DMMA, BMMA, QMMA,
/// OMMA, HGMMA, ...).
pub fn is_tensor_opcode(opcode: &str) -> bool {
    let base = opcode.split('.').next().unwrap_or("");
    base.len() > 3 && base.ends_with("MMA")
}

/// A SASS listing: instructions in address order and the labels nvdisasm prints.
#[derive(Clone, Debug, Default)]
pub struct Sass {
    pub instrs: Vec<SassInstr>,
    labels: BTreeMap<String, u64>,
}

/// Parse `cuobjdump --dump-sass` or `nvdisasm` output (one function per cubin, subroutines
/// included).
pub fn parse_sass(text: &str) -> Sass {
    let mut sass = Sass::default();
    let mut pending: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(label) = t.strip_suffix(':')
            && !label.is_empty()
            && !label.contains(char::is_whitespace)
        {
            pending.push(label.to_string());
            continue;
        }
        let Some(rest) = t.strip_prefix("/*") else {
            continue;
        };
        let Some((addr, rest)) = rest.split_once("*/") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        // Drop the encoding comment and everything from the terminating ';'.
        let rest = rest.split("/*").next().unwrap_or("");
        let Some((body, _)) = rest.split_once(';') else {
            continue;
        };
        let mut words = body.trim();
        let mut pred = None;
        if words.starts_with('@') {
            let (p, r) = words.split_once(char::is_whitespace).unwrap_or((words, ""));
            pred = Some(p.to_string());
            words = r.trim_start();
        }
        let (opcode, operands) = words
            .split_once(char::is_whitespace)
            .map(|(o, r)| (o, r.trim()))
            .unwrap_or((words, ""));
        if opcode.is_empty() || !opcode.starts_with(|c: char| c.is_ascii_uppercase()) {
            continue;
        }
        for l in pending.drain(..) {
            sass.labels.insert(l, addr);
        }
        sass.instrs.push(SassInstr {
            addr,
            pred,
            opcode: opcode.to_string(),
            operands: operands.to_string(),
        });
    }
    sass
}

/// What a stretch of SASS executes, calls followed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Opcode (with modifiers) → how many times it executes.
    pub opcodes: BTreeMap<String, u32>,
    pub tensor: u32,
    /// CALLs followed (subroutines ptxas emits, e.g. to emulate an mma.sync).
    pub calls: u32,
    /// Local-memory accesses (LDL/STL: register spills).
    pub local_mem: u32,
    /// Branches other than the loop's own back edge: the count is then a static one.
    pub other_branches: u32,
}

impl Counts {
    fn add(&mut self, i: &SassInstr) {
        if i.never_runs() {
            return;
        }
        *self.opcodes.entry(i.opcode.clone()).or_default() += 1;
        if i.is_tensor() {
            self.tensor += 1;
        }
        if matches!(i.base(), "LDL" | "STL") {
            self.local_mem += 1;
        }
    }
    fn merge(&mut self, o: &Counts) {
        for (k, n) in &o.opcodes {
            *self.opcodes.entry(k.clone()).or_default() += n;
        }
        self.tensor += o.tensor;
        self.calls += o.calls;
        self.local_mem += o.local_mem;
        self.other_branches += o.other_branches;
    }
}

impl Sass {
    /// The address a branch or call goes to: `0x270`, or a label `` `(.L_x_0) ``.
    pub fn target(&self, i: &SassInstr) -> Option<u64> {
        let ops = i.operands.as_str();
        if let Some(start) = ops.find("`(") {
            let name = ops[start + 2..].split(')').next()?;
            return self.labels.get(name).copied();
        }
        ops.split(|c: char| c == ',' || c.is_whitespace())
            .find_map(|w| w.strip_prefix("0x"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    }

    fn index_of(&self, addr: u64) -> Option<usize> {
        self.instrs.binary_search_by_key(&addr, |i| i.addr).ok()
    }

    /// Walk from instruction `from` up to and including the first instruction for which
    /// `stop` holds, following CALLs into their subroutines (up to RET).
    fn walk(&self, from: usize, stop: &dyn Fn(&SassInstr) -> bool, depth: u32) -> Counts {
        let mut c = Counts::default();
        for i in &self.instrs[from..] {
            c.add(i);
            if stop(i) {
                break;
            }
            match i.base() {
                "CALL" if depth < 8 => {
                    c.calls += 1;
                    if let Some(at) = self.target(i).and_then(|a| self.index_of(a)) {
                        let sub = self.walk(at, &|x| x.base() == "RET", depth + 1);
                        c.merge(&sub);
                    }
                }
                "BRA" | "BRX" | "JMP" | "JMX" => c.other_branches += 1,
                _ => {}
            }
        }
        c
    }

    /// What one run of the kernel executes from its entry to the first unconditional EXIT
    /// (for the single-mma fragment kernel: exactly one mma.sync's worth).
    pub fn straight_line(&self) -> Counts {
        if self.instrs.is_empty() {
            return Counts::default();
        }
        self.walk(0, &|i| i.base() == "EXIT" && i.pred.is_none(), 0)
    }
}

/// The timed loop of a bench kernel: the one backward branch between the two `%clock64` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedLoop {
    /// Address of the loop's first instruction (the back edge's target).
    pub start: u64,
    /// Address of the back edge.
    pub end: u64,
    /// One iteration, subroutines followed.
    pub counts: Counts,
    /// The loop's own instructions (not those of the subroutines it calls).
    pub body: Vec<SassInstr>,
}

/// Find the timed loop in a bench kernel's SASS.
pub fn timed_loop(sass: &Sass) -> Result<TimedLoop, String> {
    let clocks: Vec<u64> = sass
        .instrs
        .iter()
        .filter(|i| i.operands.contains("SR_CLOCKLO"))
        .map(|i| i.addr)
        .collect();
    if clocks.len() < 2 {
        return Err(format!(
            "expected two %clock64 reads (SR_CLOCKLO) around the loop, found {}",
            clocks.len()
        ));
    }
    let (c0, c1) = (clocks[0], clocks[1]);
    let back: Vec<(&SassInstr, u64)> = sass
        .instrs
        .iter()
        .filter(|i| i.addr > c0 && i.addr < c1 && i.base() == "BRA")
        .filter_map(|i| sass.target(i).map(|t| (i, t)))
        .filter(|(i, t)| *t < i.addr)
        .collect();
    let (edge, start) = match back.as_slice() {
        [one] => *one,
        [] => {
            return Err(
                "no backward branch between the clock reads: ptxas removed or unrolled the loop"
                    .into(),
            );
        }
        many => {
            return Err(format!(
                "{} backward branches between the clock reads: the loop was restructured",
                many.len()
            ));
        }
    };
    let from = sass
        .index_of(start)
        .ok_or_else(|| format!("the loop's branch target {start:#x} is not an instruction"))?;
    let end = edge.addr;
    // The back edge is the walk's stop, so it is not among `other_branches`.
    let counts = sass.walk(from, &|i| i.addr == end, 0);
    let body = sass
        .instrs
        .iter()
        .filter(|i| i.addr >= start && i.addr <= end)
        .cloned()
        .collect();
    Ok(TimedLoop {
        start,
        end,
        counts,
        body,
    })
}

/// What one `mma.sync` of a variant becomes on a target, read from the SASS of the single-mma
/// fragment kernel (`crate::probe::ptx::fragment_kernel`) assembled by the same toolchain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lowering {
    /// Tensor-core instructions one `mma.sync` executes.
    pub tensor_per_mma: u32,
    /// Those instructions, in order.
    pub tensor_ops: Vec<String>,
    /// Format conversions it executes (F2FP, F2F, I2F, I2I, ...), by opcode.
    pub conversions: BTreeMap<String, u32>,
    /// The first tensor instruction accumulates onto RZ: C is added by other instructions
    /// (FADD, HADD2, IADD3), so a chain through C runs through those, not the tensor core.
    pub c_added_outside: bool,
    /// The mma.sync is a call to a subroutine ptxas emits (an emulation).
    pub via_call: bool,
    /// One line: "2 × HMMA.16816.F32 + 12 × F2FP.F16.E4M3.UNPACK_B; C added outside ...".
    pub summary: String,
}

fn is_conversion(base: &str) -> bool {
    matches!(
        base,
        "F2FP" | "F2F" | "I2F" | "F2I" | "I2I" | "I2FP" | "F2IP" | "HADD2.F32"
    )
}

/// The lowering of one `mma.sync`, from the fragment kernel's SASS.
pub fn lowering(fragment_sass: &str) -> Result<Lowering, String> {
    let sass = parse_sass(fragment_sass);
    if sass.instrs.is_empty() {
        return Err("the disassembly of the fragment kernel has no instructions".into());
    }
    let counts = sass.straight_line();
    if counts.tensor == 0 {
        return Err("the fragment kernel's SASS has no tensor instruction".into());
    }
    // Tensor ops in execution order (calls followed).
    let mut ops: Vec<&SassInstr> = Vec::new();
    fn collect<'a>(
        sass: &'a Sass,
        from: usize,
        ret: bool,
        depth: u32,
        out: &mut Vec<&'a SassInstr>,
    ) {
        for i in &sass.instrs[from..] {
            if i.is_tensor() && !i.never_runs() {
                out.push(i);
            }
            if (ret && i.base() == "RET") || (!ret && i.base() == "EXIT" && i.pred.is_none()) {
                break;
            }
            if i.base() == "CALL"
                && depth < 8
                && let Some(at) = sass.target(i).and_then(|a| sass.index_of(a))
            {
                collect(sass, at, true, depth + 1, out);
            }
        }
    }
    collect(&sass, 0, false, 0, &mut ops);
    let c_added_outside = ops.first().is_some_and(|i| {
        i.operands
            .rsplit(',')
            .next()
            .is_some_and(|last| last.trim() == "RZ")
    });
    let conversions: BTreeMap<String, u32> = counts
        .opcodes
        .iter()
        .filter(|(k, _)| is_conversion(k.split('.').next().unwrap_or("")))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    let mut tensor_hist: BTreeMap<String, u32> = BTreeMap::new();
    for i in &ops {
        *tensor_hist.entry(i.opcode.clone()).or_default() += 1;
    }
    let mut parts: Vec<String> = tensor_hist
        .iter()
        .chain(conversions.iter())
        .map(|(k, n)| format!("{n} × {k}"))
        .collect();
    if parts.is_empty() {
        parts.push("nothing".into());
    }
    let mut summary = parts.join(" + ");
    if counts.calls > 0 {
        summary += " (in a subroutine ptxas calls)";
    }
    if c_added_outside {
        summary += "; C is added outside the tensor instruction";
    }
    Ok(Lowering {
        tensor_per_mma: counts.tensor,
        tensor_ops: ops.iter().map(|i| i.opcode.clone()).collect(),
        conversions,
        c_added_outside,
        via_call: counts.calls > 0,
        summary,
    })
}

/// Outcome of the SASS guard for one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// The timed loop executes exactly the expected tensor instructions, without spills.
    Verified,
    /// It does not: the figure is rejected.
    Rejected,
    /// What ran could not be inspected (PTX JIT, no ptxas or disassembler): figure rejected.
    Unverified,
}

/// The SASS guard's verdict on one bench kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SassCheck {
    pub status: CheckStatus,
    /// Why, in words ("16 tensor instructions per iteration, as expected (8 mma.sync × 2)").
    pub detail: String,
    /// mma.sync per loop iteration (UNROLL × CHAINS).
    pub body_mmas: u32,
    pub tensor_per_mma: Option<u32>,
    pub expected: Option<u32>,
    pub found: Option<u32>,
    /// One iteration of the timed loop, by opcode, subroutines followed.
    pub loop_opcodes: BTreeMap<String, u32>,
    /// The loop's SASS, as disassembled.
    pub loop_sass: Vec<String>,
}

impl SassCheck {
    pub fn unverified(body_mmas: u32, why: impl Into<String>) -> Self {
        SassCheck {
            status: CheckStatus::Unverified,
            detail: why.into(),
            body_mmas,
            tensor_per_mma: None,
            expected: None,
            found: None,
            loop_opcodes: BTreeMap::new(),
            loop_sass: Vec::new(),
        }
    }

    /// The CSV's `sass_check` cell: `verified`, `rejected: ...`, `unverified: ...`.
    pub fn cell(&self) -> String {
        match self.status {
            CheckStatus::Verified => "verified".into(),
            CheckStatus::Rejected => format!("rejected: {}", self.detail),
            CheckStatus::Unverified => format!("unverified: {}; figure rejected", self.detail),
        }
    }
}

/// Check a bench kernel's SASS: the timed loop must execute exactly
/// `body_mmas × tensor_per_mma` tensor instructions per iteration and touch no local memory.
pub fn check_loop(bench_sass: &str, tensor_per_mma: u32, body_mmas: u32) -> SassCheck {
    let expected = body_mmas * tensor_per_mma;
    let sass = parse_sass(bench_sass);
    let lp = match timed_loop(&sass) {
        Ok(l) => l,
        Err(why) => {
            return SassCheck {
                status: CheckStatus::Rejected,
                detail: why,
                body_mmas,
                tensor_per_mma: Some(tensor_per_mma),
                expected: Some(expected),
                found: None,
                loop_opcodes: BTreeMap::new(),
                loop_sass: Vec::new(),
            };
        }
    };
    let found = lp.counts.tensor;
    let mut problems = Vec::new();
    if found != expected {
        problems.push(format!(
            "{found} tensor instructions per loop iteration, expected {expected} ({body_mmas} \
             mma.sync × {tensor_per_mma}){}",
            if found < expected {
                ": ptxas merged or removed some"
            } else {
                ""
            }
        ));
    }
    if lp.counts.local_mem > 0 {
        problems.push(format!(
            "{} local-memory accesses (register spills) in the timed loop",
            lp.counts.local_mem
        ));
    }
    if lp.counts.other_branches > 0 {
        problems.push(format!(
            "{} branches inside the loop body: the count is not what one iteration executes",
            lp.counts.other_branches
        ));
    }
    let (status, detail) = if problems.is_empty() {
        (
            CheckStatus::Verified,
            format!(
                "{found} tensor instructions per loop iteration, as expected ({body_mmas} \
                 mma.sync × {tensor_per_mma})"
            ),
        )
    } else {
        (CheckStatus::Rejected, problems.join("; "))
    };
    SassCheck {
        status,
        detail,
        body_mmas,
        tensor_per_mma: Some(tensor_per_mma),
        expected: Some(expected),
        found: Some(found),
        loop_opcodes: lp.counts.opcodes,
        loop_sass: lp.body.iter().map(SassInstr::text).collect(),
    }
}

/// "2 × HMMA.16816.F32 + 4 × FADD": what one mma.sync of the timed loop executes, for every
/// opcode that runs at least once per mma.sync (loop control drops out).
pub fn loop_per_mma(check: &SassCheck) -> String {
    let body = check.body_mmas.max(1);
    let mut parts: Vec<(u32, String)> = check
        .loop_opcodes
        .iter()
        .filter(|(_, n)| **n >= body)
        .map(|(k, n)| (*n, k.clone()))
        .collect();
    // Tensor instructions first, then by count.
    parts.sort_by_key(|(n, k)| (!is_tensor_opcode(k), std::cmp::Reverse(*n), k.clone()));
    let fmt = |n: u32| {
        if n.is_multiple_of(body) {
            (n / body).to_string()
        } else {
            format!("{:.2}", n as f64 / body as f64)
        }
    };
    parts
        .iter()
        .map(|(n, k)| format!("{} × {k}", fmt(*n)))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Conversions the lowering of one mma.sync has but the timed loop runs fewer of (ptxas
/// hoisted them out of the loop because A and B do not change in it), as a sentence.
pub fn hoisted_note(lowering: &Lowering, check: &SassCheck) -> Option<String> {
    let body = check.body_mmas.max(1);
    if check.loop_opcodes.is_empty() {
        return None;
    }
    let per_mma: u32 = lowering.conversions.values().sum();
    if per_mma == 0 {
        return None;
    }
    let in_loop: u32 = check
        .loop_opcodes
        .iter()
        .filter(|(k, _)| lowering.conversions.contains_key(*k))
        .map(|(_, n)| n)
        .sum();
    (in_loop < per_mma * body).then(|| {
        format!(
            "one mma.sync lowers to {per_mma} conversions, the timed loop runs {:.2} per \
             mma.sync: A and B do not change inside the loop, so ptxas hoisted the rest out of it \
             (the figure is the tensor work plus what stayed in the loop)",
            in_loop as f64 / body as f64
        )
    })
}
