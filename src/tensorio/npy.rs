//! The numpy `.npy` format (NEP 1): a magic string, a version, a header that is a Python dict
//! literal (`{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`), then the raw data.
//!
//! Read: versions 1.0, 2.0 and 3.0; dtypes `<f4`, `<f8`, `<f2`, `|u1`/`<u1`, `<i4`, and
//! `<V2`/`|V2`,
//! which is read as **bfloat16**: numpy has no bfloat16, and `ml_dtypes` saves its bfloat16
//! arrays with the 2-byte void descr `<V2`. A file of genuine 2-byte void records would be
//! misread as bfloat16, but nothing else writes those for numeric data. Big-endian files (`>f4`)
//! are byte-swapped and Fortran-order files are transposed to C order, so the returned tensor is
//! always little-endian and row-major.
//!
//! Write: version 1.0 (2.0 when the header does not fit 1.0's 16-bit length), laid out exactly
//! as `numpy.save` lays it out (header padded with spaces to a 64-byte boundary), so for the
//! builtin dtypes the bytes are identical to numpy's. BF16 is written with descr `|V2`: numpy
//! loads it as a void array, which `ml_dtypes` users turn back into bfloat16 with
//! `a.view(ml_dtypes.bfloat16)`.
//!
//! Written here rather than through npyz (0.9.1, the maintained crate): its header parse
//! multiplies the shape without overflow checks before a caller sees the shape, so a header of
//! shape (2^32, 2^32, 16) panics inside it where overflow checks are on and reads as an empty
//! array (a length of 0) where they are off. This reader checks every product and the file's
//! length before it allocates, and names the field that is wrong.

use super::{DType, Tensor, byte_len, write_plain};
use anyhow::{Context, Result, anyhow, bail, ensure};
use std::fs;
use std::path::Path;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy aligns the start of the data to this many bytes.
const ARRAY_ALIGN: usize = 64;

/// Reads a `.npy` file into a little-endian, row-major tensor (see the module docs for the
/// accepted dtypes).
pub fn read_npy(path: &Path) -> Result<Tensor> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    npy_from_bytes(&data).with_context(|| path.display().to_string())
}

/// Writes `t` as a `.npy` file through [`crate::outfile`]: a regular file is replaced
/// atomically (a failure leaves it untouched); links, FIFOs, devices and read-only files are
/// refused. Commands with stricter rules write [`npy_to_bytes`] through their own `Outputs`.
pub fn write_npy(path: &Path, t: &Tensor) -> Result<()> {
    let bytes = npy_to_bytes(t).with_context(|| path.display().to_string())?;
    write_plain(path, &bytes, "npy file")
}

/// The bytes of `t` as a `.npy` file (numpy's own layout, see the module docs). F4, F8_E4M3 and
/// F8_E8M0 are refused: numpy has no dtype for them, and ml_dtypes saves them as raw void bytes
/// that do not say which format they hold.
pub fn npy_to_bytes(t: &Tensor) -> Result<Vec<u8>> {
    t.check().context("refusing to write a malformed tensor")?;
    let mut out = npy_preamble(t.dtype, &t.shape).context("building the npy header")?;
    out.extend_from_slice(&t.bytes);
    Ok(out)
}

/// What the header dict says, after validation.
#[derive(Debug)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Parses a whole `.npy` file held in memory. Errors give byte offsets into the file (but not
/// its name: [`read_npy`] adds that).
pub fn npy_from_bytes(data: &[u8]) -> Result<Tensor> {
    ensure!(
        data.len() >= 8,
        "file is {} bytes, too short for the 8-byte npy preamble",
        data.len()
    );
    ensure!(
        &data[..6] == MAGIC,
        "not an npy file: bytes 0..6 are {:?}, expected \"\\x93NUMPY\"",
        String::from_utf8_lossy(&data[..6])
    );
    let (major, minor) = (data[6], data[7]);
    let (len_bytes, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => bail!(
            "unsupported npy format version {major}.{minor} (bytes 6..8; supported: 1.0, 2.0, 3.0)"
        ),
    };
    let start = 8 + len_bytes;
    ensure!(
        data.len() >= start,
        "file is {} bytes, too short for the {len_bytes}-byte header length at byte 8",
        data.len()
    );
    let header_len = read_le_uint(&data[8..start]);
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= data.len())
        .ok_or_else(|| {
            anyhow!(
                "header length {header_len} (bytes 8..{start}) runs past the end of the file ({} bytes)",
                data.len()
            )
        })?;
    let text = decode_header(&data[start..end], utf8, start)?;
    let header = parse_header(&text, start)?;
    let (dtype, big_endian) = parse_descr(&header.descr)?;
    let need = byte_len(dtype, &header.shape)?;
    let have = data.len() - end;
    ensure!(
        have == need,
        "data at byte {end} holds {have} bytes but '{}' {} needs {need}{}",
        header.descr,
        shape_repr(&header.shape),
        if have < need {
            " (file truncated?)"
        } else {
            " (trailing bytes after the array)"
        }
    );
    let mut bytes = data[end..].to_vec();
    if big_endian {
        swap_bytes(&mut bytes, dtype.size());
    }
    if header.fortran_order {
        bytes = fortran_to_c(&bytes, &header.shape, dtype.size());
    }
    Ok(Tensor {
        dtype,
        shape: header.shape,
        bytes,
    })
}

fn read_le_uint(b: &[u8]) -> usize {
    b.iter()
        .rev()
        .fold(0usize, |a, &x| (a << 8) | usize::from(x))
}

/// Versions 1 and 2 store the header as latin-1, version 3 as UTF-8.
fn decode_header(raw: &[u8], utf8: bool, offset: usize) -> Result<String> {
    if utf8 {
        String::from_utf8(raw.to_vec()).map_err(|e| {
            anyhow!(
                "header is not valid UTF-8 at byte {}",
                offset + e.utf8_error().valid_up_to()
            )
        })
    } else {
        Ok(raw.iter().map(|&b| char::from(b)).collect())
    }
}

/// Maps a numpy descr to our dtype and whether the file's elements are big-endian.
fn parse_descr(descr: &str) -> Result<(DType, bool)> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('|', descr),
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "V2" if order != '>' => DType::BF16,
        _ => bail!(
            "unsupported dtype '{descr}' in field 'descr' (supported: '<f4', '<f8', '<f2', '|u1', \
             '<i4', their big-endian forms, and '<V2'/'|V2' read as bfloat16)"
        ),
    };
    // Multi-byte numbers must say their byte order: '=' (the writer's native order) and '|'
    // (not applicable) leave it unknown. Void has no byte order; ml_dtypes writes '<V2'.
    let big_endian = match (order, dtype) {
        (_, DType::U8) | ('<', _) | ('|', DType::BF16) => false,
        ('>', _) => true,
        _ => bail!("dtype '{descr}' in field 'descr' does not say its byte order"),
    };
    Ok((dtype, big_endian))
}

fn swap_bytes(bytes: &mut [u8], size: usize) {
    for chunk in bytes.chunks_exact_mut(size) {
        chunk.reverse();
    }
}

/// Reorders column-major (first index fastest) data into row-major order. `bytes` has already
/// been checked to hold exactly `shape` elements of `size` bytes, so no index can overflow.
fn fortran_to_c(bytes: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    let numel: usize = shape.iter().product();
    let mut strides = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        strides[k] = strides[k - 1] * shape[k - 1];
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..numel {
        let off: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&bytes[off * size..(off + 1) * size]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The header: a Python dict literal.

/// The Python literal values a header can contain.
#[derive(Debug)]
enum PyValue {
    Str(String),
    Bool(bool),
    Int(u64),
    None,
    Seq(Vec<PyValue>),
}

/// Parses and validates the header dict. `base` is the header's byte offset in the file, so
/// errors point at a file position.
fn parse_header(text: &str, base: usize) -> Result<Header> {
    let mut p = Parser::new(text, base);
    let entries = p.dict()?;
    p.skip_ws();
    if p.pos < p.chars.len() {
        bail!("{}: unexpected text after the header dict", p.at());
    }
    header_from_entries(entries, base)
}

fn header_from_entries(entries: Vec<(String, PyValue)>, base: usize) -> Result<Header> {
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (key, value) in entries {
        let slot_taken = match key.as_str() {
            "descr" => descr.replace(value).is_some(),
            "fortran_order" => fortran.replace(value).is_some(),
            "shape" => shape.replace(value).is_some(),
            _ => bail!(
                "header at byte {base}: unexpected key '{key}' (expected 'descr', 'fortran_order', 'shape')"
            ),
        };
        ensure!(
            !slot_taken,
            "header at byte {base}: key '{key}' appears twice"
        );
    }
    let missing = |k: &str| anyhow!("header at byte {base}: missing key '{k}'");
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        PyValue::Str(s) => s,
        PyValue::Seq(_) => {
            bail!("header field 'descr': structured (record) dtypes are not supported")
        }
        v => bail!("header field 'descr': expected a string, found {v:?}"),
    };
    let fortran_order = match fortran.ok_or_else(|| missing("fortran_order"))? {
        PyValue::Bool(b) => b,
        v => bail!("header field 'fortran_order': expected True or False, found {v:?}"),
    };
    let shape = match shape.ok_or_else(|| missing("shape"))? {
        PyValue::Seq(items) => shape_dims(items)?,
        v => bail!("header field 'shape': expected a tuple of integers, found {v:?}"),
    };
    Ok(Header {
        descr,
        fortran_order,
        shape,
    })
}

fn shape_dims(items: Vec<PyValue>) -> Result<Vec<usize>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            PyValue::Int(n) => usize::try_from(n)
                .map_err(|_| anyhow!("header field 'shape': dimension {i} ({n}) is too large")),
            v => bail!("header field 'shape': dimension {i} is {v:?}, not an integer"),
        })
        .collect()
}

/// A recursive-descent parser for the subset of Python literals numpy headers use.
struct Parser {
    chars: Vec<char>,
    pos: usize,
    base: usize,
}

/// Deep nesting can only come from a hostile file; refuse it instead of overflowing the stack.
const MAX_DEPTH: usize = 32;

impl Parser {
    fn new(text: &str, base: usize) -> Parser {
        Parser {
            chars: text.chars().collect(),
            pos: 0,
            base,
        }
    }

    /// Where the parser is, for error messages. Header text is ASCII in practice, so the char
    /// index is the byte offset.
    fn at(&self) -> String {
        format!("header byte {}", self.base + self.pos)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        self.skip_ws();
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            found => bail!("{}: expected '{c}', found {}", self.at(), describe(found)),
        }
    }

    /// `{ key: value, ... }` with an optional trailing comma.
    fn dict(&mut self) -> Result<Vec<(String, PyValue)>> {
        self.expect('{')?;
        let mut entries = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some('}') {
                self.pos += 1;
                return Ok(entries);
            }
            let key = match self.value(1)? {
                PyValue::Str(s) => s,
                v => bail!(
                    "{}: header dict key must be a string, found {v:?}",
                    self.at()
                ),
            };
            self.expect(':')?;
            let value = self.value(1)?;
            entries.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {}
                found => bail!(
                    "{}: expected ',' or '}}', found {}",
                    self.at(),
                    describe(found)
                ),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyValue> {
        ensure!(
            depth <= MAX_DEPTH,
            "{}: header nested too deeply",
            self.at()
        );
        self.skip_ws();
        match self.peek() {
            Some(q @ ('\'' | '"')) => self.string(q).map(PyValue::Str),
            Some('(') => self.seq(')', depth).map(PyValue::Seq),
            Some('[') => self.seq(']', depth).map(PyValue::Seq),
            Some(c) if c.is_ascii_digit() => self.int(),
            Some(c) if c.is_ascii_alphabetic() => self.word(),
            found => bail!("{}: expected a value, found {}", self.at(), describe(found)),
        }
    }

    /// `(a, b)`, `(a,)`, `()`, and the same with brackets.
    fn seq(&mut self, close: char, depth: usize) -> Result<Vec<PyValue>> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(c) if c == close => {}
                found => bail!(
                    "{}: expected ',' or '{close}', found {}",
                    self.at(),
                    describe(found)
                ),
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<String> {
        let start = self.at();
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None => bail!("{start}: unterminated string"),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(s);
                }
                Some('\\') => {
                    self.pos += 1;
                    let c = self
                        .peek()
                        .ok_or_else(|| anyhow!("{start}: unterminated string"))?;
                    s.push(c);
                    self.pos += 1;
                }
                Some(c) => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// A non-negative decimal integer; Python 2 numpy wrote a trailing `L` on longs.
    fn int(&mut self) -> Result<PyValue> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        if self.peek() == Some('L') {
            self.pos += 1;
        }
        digits.parse::<u64>().map(PyValue::Int).map_err(|_| {
            anyhow!(
                "header byte {}: integer {digits} is too large",
                self.base + start
            )
        })
    }

    fn word(&mut self) -> Result<PyValue> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        match word.as_str() {
            "True" => Ok(PyValue::Bool(true)),
            "False" => Ok(PyValue::Bool(false)),
            "None" => Ok(PyValue::None),
            _ => bail!(
                "header byte {}: unexpected word '{word}'",
                self.base + start
            ),
        }
    }
}

fn describe(c: Option<char>) -> String {
    match c {
        Some(c) => format!("{c:?}"),
        None => "the end of the header".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Writing.

fn descr_for(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::BF16 => "|V2",
        DType::U8 => "|u1",
        DType::I32 => "<i4",
        DType::F4 | DType::F8E4M3 | DType::F8E8M0 => bail!(
            "{dtype} has no numpy dtype (ml_dtypes saves it as untyped void bytes); write it to \
             a .safetensors file, which names the type"
        ),
    })
}

/// Python's `repr` of a shape tuple: `()`, `(5,)`, `(3, 4)`.
fn shape_repr(shape: &[usize]) -> String {
    match shape {
        [d] => format!("({d},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// Magic, version, header length and header, padded like `numpy.lib.format` does: spaces and a
/// final newline so that the data starts on a 64-byte boundary.
fn npy_preamble(dtype: DType, shape: &[usize]) -> Result<Vec<u8>> {
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        descr_for(dtype)?,
        shape_repr(shape)
    );
    let padded_len = |len_bytes: usize| {
        let unpadded = MAGIC.len() + 2 + len_bytes + dict.len() + 1;
        dict.len() + 1 + ARRAY_ALIGN - unpadded % ARRAY_ALIGN
    };
    // Version 1.0 stores the header length in 16 bits; 2.0 only widens that field to 32.
    let (major, len_bytes) = if padded_len(2) <= usize::from(u16::MAX) {
        (1u8, 2usize)
    } else {
        (2, 4)
    };
    let header_len = padded_len(len_bytes);
    let len_field = u32::try_from(header_len)
        .map_err(|_| anyhow!("header of {header_len} bytes is too long even for npy 2.0"))?;
    let total = MAGIC.len() + 2 + len_bytes + header_len;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    out.extend_from_slice(&len_field.to_le_bytes()[..len_bytes]);
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parses_numpy_forms() {
        for (text, shape) in [
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }     \n",
                vec![3, 4],
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                vec![],
            ),
            (
                "{'descr':'<f4','fortran_order':False,'shape':(5,)}",
                vec![5],
            ),
            (
                "{ \"descr\" : '<f4' , 'shape' : ( 2 , 0L , 7 ) , 'fortran_order' : True }",
                vec![2, 0, 7],
            ),
        ] {
            let h = parse_header(text, 10).unwrap();
            assert_eq!(h.shape, shape, "{text}");
            assert_eq!(h.descr, "<f4");
        }
    }

    #[test]
    fn fortran_transpose() {
        // 2x3 column-major [a00 a10 a01 a11 a02 a12] -> row-major.
        let f = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(fortran_to_c(&f, &[2, 3], 1), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn preamble_is_aligned() {
        for shape in [vec![], vec![1], vec![3, 4], vec![1; 40]] {
            let p = npy_preamble(DType::F32, &shape).unwrap();
            assert_eq!(p.len() % ARRAY_ALIGN, 0);
            assert_eq!(p.last(), Some(&b'\n'));
        }
        let long = npy_preamble(DType::F32, &vec![1; 30000]).unwrap();
        assert_eq!(long[6], 2);
        assert_eq!(long.len() % ARRAY_ALIGN, 0);
    }
}
