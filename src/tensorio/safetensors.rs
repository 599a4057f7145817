//! The `.safetensors` format: an 8-byte little-endian header length N, N bytes of JSON
//! (`{"__metadata__": {"key": "value"}, "name": {"dtype": "F32", "shape": [..],
//! "data_offsets": [begin, end]}, ...}`), then the data buffer the offsets point into. Read and
//! written through the format's reference implementation, the `safetensors` crate.
//!
//! Reading: the reference reader decides whether a file is valid and where each tensor's bytes
//! lie. It says *that* a file is broken but seldom where ("invalid offset for tensor", "incomplete
//! metadata"), so the header is also parsed here, in file order, to
//! - refuse what the reference lets through although only a broken writer makes it: a tensor or
//!   `__metadata__` key given twice (JSON parsers keep the last one silently), a field the format
//!   does not have, a header that is not a JSON object, a dtype a [`Tensor`] cannot hold;
//! - when the reference refuses a file, say which tensor, field and byte range break which rule:
//!   the header length against the file size, each tensor's byte range against its shape and
//!   the buffer, and the tiling of the buffer (no gaps, no overlaps, nothing left over).
//!
//! Writing: the header holds the reference's own `TensorInfo` entries, in the reference writer's
//! order (by dtype, widest first, so every tensor starts aligned; then by name), and
//! `__metadata__` first, keys sorted: the reference writer takes metadata as a `HashMap`, whose
//! order changes from run to run, and what fp4probe writes must be byte-identical run to run.
//! The header is padded with spaces to a multiple of 8 bytes, as the reference pads it. Every
//! file is read back through the reference reader before it is handed out.

use super::{ALL_DTYPES, DType, Tensor, byte_len, write_plain};
use ::safetensors::SafeTensors as Reference;
use ::safetensors::tensor::{Dtype as RefDtype, Metadata, TensorInfo};
use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
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

/// The bytes of a safetensors file holding `tensors` and `metadata` (omitted when empty), laid
/// out as the reference writer lays them out (see the module docs). The metadata comes first in
/// the header, so a marker in it lies near the top.
pub fn safetensors_to_bytes(
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut seen = HashSet::new();
    for (name, t) in tensors {
        ensure!(
            *name != METADATA_KEY,
            "a tensor cannot be called '{METADATA_KEY}'"
        );
        ensure!(seen.insert(*name), "tensor '{name}' given twice");
        t.check()
            .with_context(|| format!("tensor '{name}': refusing to write a malformed tensor"))?;
    }
    let mut ordered = tensors.to_vec();
    ordered.sort_by(|(ln, lt), (rn, rt)| {
        reference_dtype(rt.dtype)
            .cmp(&reference_dtype(lt.dtype))
            .then(ln.cmp(rn))
    });
    let header = build_header(&ordered, metadata)?;
    let data: usize = ordered.iter().map(|(_, t)| t.bytes.len()).sum();
    let mut out = Vec::with_capacity(8 + header.len() + data);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for (_, t) in &ordered {
        out.extend_from_slice(&t.bytes);
    }
    Reference::read_metadata(&out).map_err(|e| {
        anyhow!("internal error: the safetensors reference reader refuses the file built here: {e}")
    })?;
    Ok(out)
}

/// The reference crate's name for a dtype.
fn reference_dtype(d: DType) -> RefDtype {
    match d {
        DType::F32 => RefDtype::F32,
        DType::F16 => RefDtype::F16,
        DType::BF16 => RefDtype::BF16,
        DType::U8 => RefDtype::U8,
        DType::I32 => RefDtype::I32,
        DType::F64 => RefDtype::F64,
        DType::F4 => RefDtype::F4,
        DType::F8E4M3 => RefDtype::F8_E4M3,
        DType::F8E8M0 => RefDtype::F8_E8M0,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// One tensor's header entry as the file gives it: its fields are checked when parsed, its byte
/// range only to explain why the reference reader refused the file.
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
        entries.push(parse_entry(key, fields)?);
    }
    let (n, reference) =
        Reference::read_metadata(data).map_err(|e| explain(&mut entries, buffer.len(), e))?;
    let buffer = &data[8 + n..];
    // File order: by byte range, and tensors of no bytes that share an offset in header order
    // (the reference's own order among those comes from a hash map, so it changes run to run).
    entries.sort_by_key(|e| (e.begin, e.end));
    let tensors = entries
        .into_iter()
        .map(|e| tensor_of(&reference, buffer, e.name))
        .collect::<Result<_>>()?;
    Ok(SafeTensors {
        tensors,
        metadata: metadata.unwrap_or_default(),
    })
}

/// One tensor as the reference reader found it: dtype, shape and bytes.
fn tensor_of(reference: &Metadata, buffer: &[u8], name: String) -> Result<(String, Tensor)> {
    let info = reference.info(&name).ok_or_else(|| {
        anyhow!(
            "internal error: the reference reader lists tensor '{name}' but has no entry for it"
        )
    })?;
    let dtype = ALL_DTYPES
        .into_iter()
        .find(|&d| reference_dtype(d) == info.dtype)
        .ok_or_else(|| anyhow!("tensor '{name}': unsupported dtype {}", info.dtype))?;
    let (begin, end) = info.data_offsets;
    let bytes = buffer.get(begin..end).ok_or_else(|| {
        anyhow!(
            "internal error: the reference reader places tensor '{name}' at [{begin}, {end}), \
             outside the {}-byte data buffer",
            buffer.len()
        )
    })?;
    let t = Tensor::new(dtype, info.shape.clone(), bytes.to_vec())
        .with_context(|| format!("tensor '{name}'"))?;
    Ok((name, t))
}

/// Why the reference reader refused a file whose header parsed here: the first entry that breaks
/// a rule on its own, else the first gap or overlap in the buffer, each with the reference
/// reader's own words; those alone when nothing here names the place.
fn explain(
    entries: &mut [Entry],
    buffer_len: usize,
    e: ::safetensors::SafeTensorError,
) -> anyhow::Error {
    let located = entries
        .iter()
        .try_for_each(|entry| check_entry(entry, buffer_len))
        .and_then(|()| {
            entries.sort_by_key(|e| (e.begin, e.end));
            check_tiling(entries, buffer_len)
        });
    match located {
        Err(why) => anyhow!("{why:#} (the safetensors reference reader: {e})"),
        Ok(()) => anyhow!("the safetensors reference reader refuses the file: {e}"),
    }
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

/// The JSON header: `__metadata__` first (keys sorted), then each tensor's reference
/// `TensorInfo` in the order given, padded with spaces to a multiple of 8 bytes.
fn build_header(
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut entries = Vec::with_capacity(tensors.len());
    let mut offset = 0usize;
    for (name, t) in tensors {
        let end = offset + t.bytes.len();
        let info = TensorInfo {
            dtype: reference_dtype(t.dtype),
            shape: t.shape.clone(),
            data_offsets: (offset, end),
        };
        entries.push((*name, info));
        offset = end;
    }
    let mut header = serde_json::to_vec(&HeaderOut { metadata, entries })?;
    header.resize(header.len().next_multiple_of(8), b' ');
    ensure!(
        header.len() as u64 <= MAX_HEADER,
        "the header would be {} bytes, over the format's {MAX_HEADER}-byte limit",
        header.len()
    );
    Ok(header)
}

/// A header as written: one JSON object, `__metadata__` (when not empty) first.
struct HeaderOut<'a> {
    metadata: &'a BTreeMap<String, String>,
    entries: Vec<(&'a str, TensorInfo)>,
}

impl Serialize for HeaderOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let with_meta = !self.metadata.is_empty();
        let mut map = s.serialize_map(Some(self.entries.len() + usize::from(with_meta)))?;
        if with_meta {
            map.serialize_entry(METADATA_KEY, self.metadata)?;
        }
        for (name, info) in &self.entries {
            map.serialize_entry(name, info)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_are_the_reference_names() {
        for d in ALL_DTYPES {
            assert_eq!(reference_dtype(d).to_string(), d.name());
            assert_eq!(reference_dtype(d).bitsize(), d.bits());
        }
    }

    #[test]
    fn a_refusal_nothing_here_locates_keeps_the_reference_words() {
        let mut entries = vec![Entry {
            name: "w".into(),
            dtype: DType::F32,
            shape: vec![1],
            begin: 0,
            end: 4,
        }];
        let e = explain(
            &mut entries,
            4,
            ::safetensors::SafeTensorError::MetadataIncompleteBuffer,
        );
        assert_eq!(
            format!("{e:#}"),
            "the safetensors reference reader refuses the file: incomplete metadata, file not \
             fully covered"
        );
        let e = explain(
            &mut entries,
            8,
            ::safetensors::SafeTensorError::MetadataIncompleteBuffer,
        );
        assert_eq!(
            format!("{e:#}"),
            "gap: data bytes [4, 8) at the end of the data buffer belong to no tensor (the \
             safetensors reference reader: incomplete metadata, file not fully covered)"
        );
    }
}
