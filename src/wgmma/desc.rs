//! The shared-memory matrix descriptor of `wgmma` and the settings a probe chooses for it.
//!
//! Bit fields (PTX ISA, "Matrix Descriptor Format"; every field here is what the probe writes,
//! the meaning of LBO, SBO and the base offset is what it measures):
//! - 13..0: start address, `(addr & 0x3FFFF) >> 4`;
//! - 29..16: leading dimension byte offset (LBO) `>> 4`;
//! - 45..32: stride dimension byte offset (SBO) `>> 4`;
//! - 51..49: matrix base offset;
//! - 63..62: swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte.

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Lowest bit of each field in the 64-bit descriptor: what [`Desc::encode`] writes, and what
/// the generated `make_desc` of `fp4probe codegen` writes too.
pub const START_SHIFT: u32 = 0;
pub const LBO_SHIFT: u32 = 16;
pub const SBO_SHIFT: u32 = 32;
pub const BASE_OFFSET_SHIFT: u32 = 49;
pub const SWIZZLE_SHIFT: u32 = 62;
/// The byte values a 14-bit address field holds: bits 17..4 (`(x & ADDR_MASK) >> 4`).
pub const ADDR_MASK: u64 = 0x3_FFFF;

/// The swizzle mode of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Swizzle {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "32B")]
    B32,
    #[serde(rename = "64B")]
    B64,
    #[serde(rename = "128B")]
    B128,
}

impl Swizzle {
    pub const ALL: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

    pub fn name(self) -> &'static str {
        match self {
            Swizzle::None => "none",
            Swizzle::B32 => "32B",
            Swizzle::B64 => "64B",
            Swizzle::B128 => "128B",
        }
    }

    /// The descriptor's 2-bit code.
    pub fn code(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }

    /// Row width of the swizzle atom in bytes (16 for none: one core-matrix row).
    pub fn width(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Swizzle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "0" => Ok(Swizzle::None),
            "32b" | "32" => Ok(Swizzle::B32),
            "64b" | "64" => Ok(Swizzle::B64),
            "128b" | "128" => Ok(Swizzle::B128),
            _ => Err(format!(
                "unknown swizzle '{s}' (known: none, 32B, 64B, 128B)"
            )),
        }
    }
}

/// Which dimension is contiguous in shared memory: K (no transpose) or M/N (the transpose
/// immediate set, f16/bf16 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Major {
    K,
    MN,
}

impl Major {
    pub fn name(self) -> &'static str {
        match self {
            Major::K => "K",
            Major::MN => "MN",
        }
    }
}

impl fmt::Display for Major {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Major {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "K" => Ok(Major::K),
            "MN" | "M" | "N" => Ok(Major::MN),
            _ => Err(format!("unknown major-ness '{s}' (known: K, MN)")),
        }
    }
}

/// One descriptor's settings, addresses relative to a 1024-byte-aligned shared-memory base
/// (the probe kernel aligns its region so that `start` sets the address bits the swizzle and
/// the base offset act on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Desc {
    /// Start byte offset from the aligned base (a multiple of 16).
    pub start: u32,
    /// Leading dimension byte offset (a multiple of 16, < 2^18).
    pub lbo: u32,
    /// Stride dimension byte offset (a multiple of 16, < 2^18).
    pub sbo: u32,
    /// Matrix base offset, 0..=7.
    pub base_offset: u32,
    pub swizzle: Swizzle,
}

impl Desc {
    /// Refuse values the descriptor cannot hold, naming the field.
    pub fn check(&self) -> Result<()> {
        for (name, v) in [("start", self.start), ("LBO", self.lbo), ("SBO", self.sbo)] {
            if v % 16 != 0 {
                bail!("descriptor {name} = {v} is not a multiple of 16 bytes");
            }
            if v >= 1 << 18 {
                bail!("descriptor {name} = {v} does not fit its 14-bit field (< 262144 bytes)");
            }
        }
        if self.base_offset > 7 {
            bail!(
                "descriptor base offset = {} does not fit its 3-bit field (0..=7)",
                self.base_offset
            );
        }
        Ok(())
    }

    /// The 64-bit descriptor for a region whose aligned base sits at shared address `base`.
    pub fn encode(&self, base: u32) -> u64 {
        let f = |bytes: u32| ((bytes as u64) & ADDR_MASK) >> 4;
        f(base + self.start) << START_SHIFT
            | f(self.lbo) << LBO_SHIFT
            | f(self.sbo) << SBO_SHIFT
            | (self.base_offset as u64 & 7) << BASE_OFFSET_SHIFT
            | self.swizzle.code() << SWIZZLE_SHIFT
    }

    /// The descriptor of the region at base 0: the probe kernel adds `base >> 4`, which
    /// lands in the start field (shared addresses stay below 2^18, so the field cannot carry).
    pub fn template(&self) -> u64 {
        self.encode(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_puts_each_field_in_place() {
        let d = Desc {
            start: 0x400,
            lbo: 128,
            sbo: 1024,
            base_offset: 5,
            swizzle: Swizzle::B64,
        };
        let e = d.encode(0x1000);
        assert_eq!(e & 0x3FFF, 0x1400 >> 4);
        assert_eq!((e >> 16) & 0x3FFF, 8);
        assert_eq!((e >> 32) & 0x3FFF, 64);
        assert_eq!((e >> 49) & 7, 5);
        assert_eq!(e >> 62, 2);
        // What the probe kernel computes: the template plus the base address >> 4.
        assert_eq!(d.template() + (0x1000 >> 4), e);
    }

    #[test]
    fn bad_fields_are_named() {
        let mut d = Desc {
            start: 0,
            lbo: 24,
            sbo: 0,
            base_offset: 0,
            swizzle: Swizzle::None,
        };
        assert!(d.check().unwrap_err().to_string().contains("LBO"));
        d.lbo = 16;
        d.base_offset = 9;
        assert!(d.check().unwrap_err().to_string().contains("base offset"));
    }
}
