//! Error metrics between an output and a reference, in f64 over flat slices (f32 or f64).

use std::fmt;

fn widen<T: Copy + Into<f64>>(x: &[T]) -> impl Iterator<Item = f64> + '_ {
    x.iter().map(|&v| v.into())
}

fn check_lengths(a: usize, b: usize) {
    assert_eq!(a, b, "compared slices differ in length");
}

/// a·b / (‖a‖‖b‖). Two all-zero slices are identical (1); one all-zero slice is orthogonal to
/// anything (0). Panics if the lengths differ.
pub fn cosine<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    check_lengths(a.len(), b.len());
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (x, y) in widen(a).zip(widen(b)) {
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    match (aa == 0.0, bb == 0.0) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        _ => ab / (aa.sqrt() * bb.sqrt()),
    }
}

/// ‖a − b‖₂ / ‖b‖₂, b being the reference: 0 when both are zero, ∞ when only b is.
pub fn relative_error<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    check_lengths(a.len(), b.len());
    let (mut dd, mut bb) = (0.0, 0.0);
    for (x, y) in widen(a).zip(widen(b)) {
        dd += (x - y) * (x - y);
        bb += y * y;
    }
    match (dd == 0.0, bb == 0.0) {
        (true, _) => 0.0,
        (false, true) => f64::INFINITY,
        _ => (dd / bb).sqrt(),
    }
}

/// max |a − b| (0 for empty slices; NaN anywhere gives NaN).
pub fn max_abs_error<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    check_lengths(a.len(), b.len());
    widen(a).zip(widen(b)).fold(0.0, |m: f64, (x, y)| {
        let e = (x - y).abs();
        if e.is_nan() || m.is_nan() {
            f64::NAN
        } else {
            m.max(e)
        }
    })
}

/// The three metrics of an output against a reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    pub cosine: f64,
    pub relative_error: f64,
    pub max_abs_error: f64,
    pub len: usize,
}

impl Comparison {
    /// `a` is the output under test, `b` the reference.
    pub fn new<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> Comparison {
        Comparison {
            cosine: cosine(a, b),
            relative_error: relative_error(a, b),
            max_abs_error: max_abs_error(a, b),
            len: a.len(),
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cosine {:.6}, relative error {:.3e}, max |error| {:.3e} over {} values",
            self.cosine, self.relative_error, self.max_abs_error, self.len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_of_known_vectors() {
        let b = [3.0f64, 4.0];
        let a = [3.0f32, 5.0];
        assert_eq!(relative_error(&a, &b), 0.2);
        assert_eq!(max_abs_error(&a, &b), 1.0);
        assert!((cosine(&a, &b) - 29.0 / (5.0 * 34f64.sqrt())).abs() < 1e-15);
        assert_eq!(cosine(&[0.0f32; 2], &[0.0f32; 2]), 1.0);
        assert_eq!(cosine(&[0.0f32; 2], &b), 0.0);
        assert_eq!(relative_error(&b, &b), 0.0);
        assert!(max_abs_error(&[f64::NAN, 0.0], &[0.0, 0.0]).is_nan());
        let c = Comparison::new(&a, &b);
        assert!(c.to_string().starts_with("cosine 0.99"), "{c}");
    }
}
