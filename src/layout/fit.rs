//! Closed-form fitting (placeholder until the fitter lands).
use super::Coord;
use crate::isa::{Operand, Variant};
use serde::{Deserialize, Serialize};
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BitWeights;
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClosedForm {
    pub row: Option<String>,
    pub col: Option<String>,
    pub cute: Option<String>,
    pub bit_weights: Option<BitWeights>,
}
pub fn fit(_v: &Variant, _op: Operand, _map: &[Coord]) -> ClosedForm {
    ClosedForm::default()
}
impl std::fmt::Display for ClosedForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.row)
    }
}
