//! The `.safetensors` format: an 8-byte little-endian header length N, N bytes of JSON
//! (`{"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//! "__metadata__": {"key": "value"}}`), then the data buffer the offsets point into.
//!
//! The reader checks what the reference implementation checks, and says where a file breaks a
//! rule: the header length against the file size, JSON syntax, dtypes, that each tensor's byte
//! range matches its shape, that no name appears twice, and that the ranges tile the data buffer
//! exactly (no gaps, no overlaps, nothing left over at the end).
//!
//! The writer pads the header with spaces to a multiple of 8 bytes, like the reference
//! implementation, so the data buffer starts aligned; tensors are laid out in the order given.

use super::{ALL_DTYPES, DType, Tensor, byte_len, write_plain};
use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs;
use std::marker::PhantomData;
use std::path::Path;

/// The reference implementation refuses headers above 100 MB; a larger length field is a
/// corrupt or hostile file, not a model.
const MAX_HEADER: u64 = 100_000_000;
const METADATA_KEY: &str = "__metadata__";

/// The contents of a safetensors file.
#[derive(Clone, Debug, PartialEq)]
pub struct SafeTensors {
    /// In file order: sorted by where each tensor's data lies in the buffer.
    pub tensors: Vec<(String, Tensor)>,
    /// The free-form string map stored under `__metadata__` (empty when there is none).
    pub metadata: BTreeMap<String, String>,
}

impl SafeTensors {
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// Tensor names in file order.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.iter().map(|(n, _)| n.as_str()).collect()
    }
}

/// Reads and validates a whole safetensors file.
pub fn read_safetensors(path: &Path) -> Result<SafeTensors> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    safetensors_from_bytes(&data).with_context(|| path.display().to_string())
}

/// Writes `tensors` (in this order) and `metadata` (omitted when empty) as a safetensors file
/// through [`crate::outfile`]: a regular file is replaced atomically (a failure leaves it
/// untouched); links, FIFOs, devices and read-only files are refused. Commands with stricter
/// rules write [`safetensors_to_bytes`] through their own `Outputs`.
pub fn write_safetensors(
    path: &Path,
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    let bytes =
        safetensors_to_bytes(tensors, metadata).with_context(|| path.display().to_string())?;
    write_plain(path, &bytes, "safetensors file")
}

/// The bytes of a safetensors file holding `tensors` (in this order) and `metadata` (omitted
/// when empty). The metadata comes first in the header, so a marker in it lies near the top.
pub fn safetensors_to_bytes(
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let header = build_header(tensors, metadata)?;
    let data: usize = tensors.iter().map(|(_, t)| t.bytes.len()).sum();
    let mut out = Vec::with_capacity(8 + header.len() + data);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for (_, t) in tensors {
        out.extend_from_slice(&t.bytes);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// One tensor's header entry, validated against its own shape but not yet against the others.
struct Entry {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    begin: usize,
    end: usize,
}

/// Parses and validates a whole safetensors file held in memory. Errors name the tensor, field
/// and byte offsets (but not the file: [`read_safetensors`] adds that).
pub fn safetensors_from_bytes(data: &[u8]) -> Result<SafeTensors> {
    let (header, buffer) = split_header(data)?;
    let mut entries = Vec::new();
    let mut metadata = None;
    let mut seen = HashSet::new();
    for (key, fields) in header {
        if key == METADATA_KEY {
            ensure!(
                metadata.is_none(),
                "'{METADATA_KEY}' appears twice in the header"
            );
            metadata = Some(parse_metadata(fields)?);
            continue;
        }
        ensure!(
            seen.insert(key.clone()),
            "tensor '{key}' appears twice in the header"
        );
        let entry = parse_entry(key, fields)?;
        check_entry(&entry, buffer.len())?;
        entries.push(entry);
    }
    entries.sort_by_key(|e| (e.begin, e.end));
    check_tiling(&entries, buffer.len())?;
    let tensors = entries
        .into_iter()
        .map(|e| {
            let bytes = buffer[e.begin..e.end].to_vec();
            let t = Tensor {
                dtype: e.dtype,
                shape: e.shape,
                bytes,
            };
            (e.name, t)
        })
        .collect();
    Ok(SafeTensors {
        tensors,
        metadata: metadata.unwrap_or_default(),
    })
}

/// A JSON object's entries in file order, duplicates kept (serde_json's own map would silently
/// keep only the last of two equal keys, hiding a broken file).
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map
                        .next_value::<T>()
                        .map_err(|e| de::Error::custom(format_args!("under '{key}': {e}")))?;
                    out.push((key, value));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

type Header = Vec<(String, Vec<(String, Value)>)>;

/// Splits the file into the parsed header and the data buffer.
fn split_header(data: &[u8]) -> Result<(Header, &[u8])> {
    ensure!(
        data.len() >= 8,
        "file is {} bytes, too short for the 8-byte header length",
        data.len()
    );
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(&data[..8]);
    let n = u64::from_le_bytes(len_bytes);
    ensure!(
        n <= MAX_HEADER,
        "header length {n} (bytes 0..8) exceeds the {MAX_HEADER}-byte limit"
    );
    // n <= 100 MB fits usize on every platform Rust supports with std.
    let end = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&e| e <= data.len())
        .ok_or_else(|| {
            anyhow!(
                "header length {n} (bytes 0..8) runs past the end of the file ({} bytes)",
                data.len()
            )
        })?;
    let text = std::str::from_utf8(&data[8..end])
        .map_err(|e| anyhow!("header is not valid UTF-8 at byte {}", 8 + e.valid_up_to()))?;
    ensure!(
        text.starts_with('{'),
        "header (bytes 8..{end}) does not start with '{{'"
    );
    let header: Ordered<Ordered<Value>> = serde_json::from_str(text)
        .map_err(|e| anyhow!("header JSON (bytes 8..{end}) is invalid: {e}"))?;
    let header = header.0.into_iter().map(|(k, v)| (k, v.0)).collect();
    Ok((header, &data[end..]))
}

fn parse_metadata(fields: Vec<(String, Value)>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (key, value) in fields {
        let Value::String(s) = value else {
            bail!("'{METADATA_KEY}': value of '{key}' is {value}, not a string");
        };
        ensure!(
            out.insert(key.clone(), s).is_none(),
            "'{METADATA_KEY}': key '{key}' appears twice"
        );
    }
    Ok(out)
}

fn parse_entry(name: String, fields: Vec<(String, Value)>) -> Result<Entry> {
    let (mut dtype, mut shape, mut offsets) = (None, None, None);
    for (key, value) in fields {
        let slot = match key.as_str() {
            "dtype" => &mut dtype,
            "shape" => &mut shape,
            "data_offsets" => &mut offsets,
            _ => bail!(
                "tensor '{name}': unknown field '{key}' (expected 'dtype', 'shape', 'data_offsets')"
            ),
        };
        ensure!(
            slot.replace(value).is_none(),
            "tensor '{name}': field '{key}' appears twice"
        );
    }
    let missing = |f: &str| anyhow!("tensor '{name}': missing field '{f}'");
    let dtype = parse_dtype(&name, dtype.ok_or_else(|| missing("dtype"))?)?;
    let shape = parse_uints(&name, "shape", shape.ok_or_else(|| missing("shape"))?)?;
    let offsets = parse_uints(
        &name,
        "data_offsets",
        offsets.ok_or_else(|| missing("data_offsets"))?,
    )?;
    let [begin, end] = offsets[..] else {
        bail!("tensor '{name}': data_offsets {offsets:?} must be exactly [begin, end]");
    };
    Ok(Entry {
        name,
        dtype,
        shape,
        begin,
        end,
    })
}

fn parse_dtype(name: &str, value: Value) -> Result<DType> {
    let Value::String(s) = value else {
        bail!("tensor '{name}': dtype {value} is not a string");
    };
    DType::from_name(&s).ok_or_else(|| {
        let names: Vec<&str> = ALL_DTYPES.iter().map(|d| d.name()).collect();
        anyhow!(
            "tensor '{name}': unsupported dtype '{s}' (supported: {})",
            names.join(", ")
        )
    })
}

fn parse_uints(name: &str, field: &str, value: Value) -> Result<Vec<usize>> {
    let Value::Array(items) = value else {
        bail!("tensor '{name}': {field} {value} is not an array");
    };
    items
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    anyhow!("tensor '{name}': {field} entry {v} is not a non-negative integer")
                })
        })
        .collect()
}

/// Checks one entry on its own: its byte range is ordered, as long as its shape needs, and
/// inside the buffer.
fn check_entry(e: &Entry, buffer_len: usize) -> Result<()> {
    let name = &e.name;
    let (b, x) = (e.begin, e.end);
    ensure!(
        b <= x,
        "tensor '{name}': data_offsets [{b}, {x}] end before they begin"
    );
    let need = byte_len(e.dtype, &e.shape).with_context(|| format!("tensor '{name}'"))?;
    ensure!(
        x - b == need,
        "tensor '{name}': data_offsets [{b}, {x}] hold {} bytes but {} {:?} needs {need}",
        x - b,
        e.dtype,
        e.shape
    );
    ensure!(
        x <= buffer_len,
        "tensor '{name}': data_offsets [{b}, {x}] run past the end of the {buffer_len}-byte data buffer"
    );
    Ok(())
}

/// The entries, sorted by offset, must cover the buffer from 0 to its end without holes or
/// overlaps: the format requires it, and a hole means bytes nobody accounts for.
fn check_tiling(sorted: &[Entry], buffer_len: usize) -> Result<()> {
    let mut covered = 0usize;
    let mut prev: Option<&str> = None;
    for e in sorted {
        let after = match prev {
            Some(p) => format!("after tensor '{p}'"),
            None => "at the start of the data buffer".to_string(),
        };
        ensure!(
            e.begin <= covered,
            "gap: data bytes [{covered}, {}) {after} belong to no tensor (next is tensor '{}')",
            e.begin,
            e.name
        );
        ensure!(
            e.begin == covered,
            "tensor '{}': data_offsets [{}, {}] overlap tensor '{}', which ends at {covered}",
            e.name,
            e.begin,
            e.end,
            prev.unwrap_or("?")
        );
        covered = e.end;
        prev = Some(&e.name);
    }
    ensure!(
        covered == buffer_len,
        "gap: data bytes [{covered}, {buffer_len}) at the end of the data buffer belong to no tensor"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// The JSON header, `__metadata__` first (like the reference writer), padded with spaces to a
/// multiple of 8 bytes.
fn build_header(
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut fields = Vec::new();
    if !metadata.is_empty() {
        fields.push(format!(
            "{}:{}",
            json_str(METADATA_KEY),
            serde_json::to_string(metadata)?
        ));
    }
    let mut seen = HashSet::new();
    let mut offset = 0usize;
    for (name, t) in tensors {
        ensure!(
            *name != METADATA_KEY,
            "a tensor cannot be called '{METADATA_KEY}'"
        );
        ensure!(seen.insert(*name), "tensor '{name}' given twice");
        t.check()
            .with_context(|| format!("tensor '{name}': refusing to write a malformed tensor"))?;
        let end = offset + t.bytes.len();
        fields.push(format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{offset},{end}]}}",
            json_str(name),
            t.dtype.name(),
            serde_json::to_string(&t.shape)?
        ));
        offset = end;
    }
    let mut header = format!("{{{}}}", fields.join(",")).into_bytes();
    let padded = header.len().div_ceil(8) * 8;
    header.resize(padded, b' ');
    Ok(header)
}

fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}
