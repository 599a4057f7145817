//! Where a result came from: backend, device, driver, PTX text, tool version, date.

use crate::device::{BackendKind, DeviceInfo};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub backend: BackendKind,
    pub device: String,
    pub compute_capability: Option<String>,
    pub driver: Option<String>,
    /// The PTX module the experiments ran (for the emulator: the module that would run).
    pub ptx: String,
    pub tool_version: String,
    /// UTC, RFC 3339.
    pub date: String,
    pub command: String,
}

impl Provenance {
    pub fn new(info: &DeviceInfo, ptx: String) -> Self {
        Provenance {
            backend: info.backend,
            device: info.name.clone(),
            compute_capability: info.compute_capability.map(|(a, b)| format!("{a}.{b}")),
            driver: info.driver.clone(),
            ptx,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            date: utc_now_rfc3339(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }
}

/// Current UTC time without a date crate: civil-from-days (H. Hinnant's algorithm).
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
