//! Compilation targets (`sm_80`, `sm_120a`, ...) and whether a device can run one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A PTX `.target`: compute capability major/minor and whether it is arch-specific (`a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Target {
    pub major: u32,
    pub minor: u32,
    pub arch_specific: bool,
}

impl Target {
    pub const fn sm(major: u32, minor: u32) -> Self {
        Target {
            major,
            minor,
            arch_specific: false,
        }
    }
    pub const fn sm_a(major: u32, minor: u32) -> Self {
        Target {
            major,
            minor,
            arch_specific: true,
        }
    }

    /// Code for this target runs on a device of compute capability `cc`: a plain target runs on
    /// every later device; an arch-specific (`a`) one only on exactly its own.
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        if self.arch_specific {
            cc == (self.major, self.minor)
        } else {
            cc >= (self.major, self.minor)
        }
    }

    /// The target to name when compiling for a device of compute capability `cc`.
    pub fn for_device(cc: (u32, u32)) -> Self {
        // Arch-specific features (wgmma, block-scaled mma) need the `a` target of the device.
        if cc >= (9, 0) {
            Target::sm_a(cc.0, cc.1)
        } else {
            Target::sm(cc.0, cc.1)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sm_{}{}{}",
            self.major,
            self.minor,
            if self.arch_specific { "a" } else { "" }
        )
    }
}

impl From<Target> for String {
    fn from(t: Target) -> String {
        t.to_string()
    }
}

impl TryFrom<String> for Target {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("target '{s}' is not of the form sm_90 or sm_120a");
        let digits = s.strip_prefix("sm_").ok_or_else(bad)?;
        let (digits, arch_specific) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.len() < 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let (maj, min) = digits.split_at(digits.len() - 1);
        Ok(Target {
            major: maj.parse().map_err(|_| bad())?,
            minor: min.parse().map_err(|_| bad())?,
            arch_specific,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parse_and_run_rules() {
        let t: Target = "sm_120a".parse().unwrap();
        assert_eq!(t, Target::sm_a(12, 0));
        assert_eq!(t.to_string(), "sm_120a");
        assert!(!t.runs_on((9, 0)));
        assert!(t.runs_on((12, 0)));
        assert!(Target::sm(8, 9).runs_on((9, 0)));
        assert!(!Target::sm(9, 0).runs_on((8, 9)));
        assert!("sm_9".parse::<Target>().is_err());
    }
}
