//! JSON as fp4probe writes it: pretty, but with every array of scalars on one line, so that a
//! slot, a table row or a list of codes is one line rather than one line per value.

use serde::Serialize;

/// Pretty JSON with scalar arrays collapsed (see the module doc).
pub fn to_compact_json<T: Serialize>(value: &T) -> String {
    compact_scalar_arrays(&serde_json::to_string_pretty(value).expect("fp4probe records serialise"))
}

/// Collapse every array that holds only scalars onto one line, outside string literals (a
/// table row is one line, not six). Key order stays that of the struct.
fn compact_scalar_arrays(pretty: &str) -> String {
    let b = pretty.as_bytes();
    // End of the array opening at `i` when it holds no array or object, else None.
    let scalar_end = |i: usize| -> Option<usize> {
        let mut in_str = false;
        let mut j = i + 1;
        while j < b.len() {
            match (in_str, b[j]) {
                (true, b'\\') => j += 1,
                (true, b'"') => in_str = false,
                (false, b'"') => in_str = true,
                (false, b'[' | b'{') => return None,
                (false, b']') => return Some(j),
                _ => {}
            }
            j += 1;
        }
        None
    };
    let mut out = Vec::with_capacity(b.len());
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        if in_str {
            out.push(ch);
            if ch == b'\\' {
                out.push(b[i + 1]);
                i += 1;
            } else if ch == b'"' {
                in_str = false;
            }
        } else if ch == b'"' {
            in_str = true;
            out.push(ch);
        } else if let (b'[', Some(end)) = (ch, scalar_end(i)) {
            let mut inner_str = false;
            let mut j = i;
            while j <= end {
                let c = b[j];
                if inner_str {
                    out.push(c);
                    if c == b'\\' {
                        out.push(b[j + 1]);
                        j += 1;
                    } else if c == b'"' {
                        inner_str = false;
                    }
                } else {
                    match c {
                        b'"' => {
                            inner_str = true;
                            out.push(c);
                        }
                        b',' => out.extend_from_slice(b", "),
                        c if c.is_ascii_whitespace() => {}
                        c => out.push(c),
                    }
                }
                j += 1;
            }
            i = end;
        } else {
            out.push(ch);
        }
        i += 1;
    }
    String::from_utf8(out).expect("bytes copied verbatim")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_arrays_go_on_one_line_and_strings_are_untouched() {
        let v = serde_json::json!({
            "rows": [[0, "0x00", 0.0, "0x00000000"], [1, "0x01", "NaN", "0x7fc00000"]],
            "text": "keep [ this , ] \"as [1, 2]\" is",
            "e": [],
            "nested": [{"a": [1, 2]}]
        });
        let s = compact_scalar_arrays(&serde_json::to_string_pretty(&v).unwrap());
        assert!(s.contains("[0, \"0x00\", 0.0, \"0x00000000\"]"), "{s}");
        assert!(s.contains("\"a\": [1, 2]"), "{s}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
    }
}
