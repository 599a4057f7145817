//! Near-miss spellings that look plausible (and that people have tried) but ptxas rejects.
//! The message is what ptxas 13.0 printed; `tests/ptxas_catalog.rs` checks each is still
//! rejected with that message by the pinned ptxas.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Rejected {
    /// The instruction as someone might write it.
    pub ptx: &'static str,
    pub target: &'static str,
    /// The essential part of ptxas's error message.
    pub ptxas_says: &'static str,
    /// What to write instead.
    pub instead: &'static str,
}

pub fn rejected_spellings() -> Vec<Rejected> {
    vec![]
}
