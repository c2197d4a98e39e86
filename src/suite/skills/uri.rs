//! `skill://` URIs: a path of segments, each percent-encoded where it must be,
//! and the parser that turns a requested URI back into a path of the catalog
//! without ever letting `.`, `..`, an empty segment, a separator or an invalid
//! escape through.

/// The scheme every skill URI starts with.
pub const SCHEME: &str = "skill://";

/// Whether `segment` may be one segment of a served path: not empty, not `.`
/// or `..`, no `/`, `\`, NUL or other control character.
pub(crate) fn safe_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// `segment` with every byte outside RFC 3986's unreserved characters and
/// sub-delimiters (and `:` `@`) percent-encoded.
fn encode_segment(segment: &str, out: &mut String) {
    for b in segment.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// The URI of `path` (segments joined by `/`, each a [`safe_segment`]).
pub(crate) fn to_uri(path: &str) -> String {
    let mut out = String::with_capacity(SCHEME.len() + path.len());
    out.push_str(SCHEME);
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        encode_segment(segment, &mut out);
    }
    out
}

/// The path a `skill://` URI names (decoded segments joined by `/`), or
/// `None` when it is not one this catalog could serve: another scheme, a
/// query or fragment, an empty segment (`//`, a trailing `/`), an invalid
/// percent-escape, or a decoded segment that is not a [`safe_segment`]
/// (`..`, `.`, an encoded `/` or `\`, a NUL).
pub(crate) fn parse(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix(SCHEME)?;
    if rest.is_empty() || rest.contains(['?', '#']) {
        return None;
    }
    let mut path = String::with_capacity(rest.len());
    for (i, raw) in rest.split('/').enumerate() {
        let segment = decode(raw)?;
        if !safe_segment(&segment) {
            return None;
        }
        if i > 0 {
            path.push('/');
        }
        path.push_str(&segment);
    }
    Some(path)
}

fn decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            // Two hex digits exactly (`from_str_radix` alone takes a sign).
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_their_uris() {
        for path in [
            "git-workflow/SKILL.md",
            "acme/billing/a b/ü.md",
            "x/100%.txt",
        ] {
            let uri = to_uri(path);
            assert_eq!(parse(&uri).as_deref(), Some(path), "{uri}");
        }
        assert_eq!(to_uri("a/b c.md"), "skill://a/b%20c.md");
    }

    #[test]
    fn traversal_and_invalid_escapes_name_nothing() {
        for uri in [
            "skill://a/../b/SKILL.md",
            "skill://a/%2e%2e/SKILL.md",
            "skill://a/%2E%2E/%2E%2E/etc/passwd",
            "skill://a/./SKILL.md",
            "skill://a/b%2fc",
            "skill://a/b%5cc",
            "skill://a//b",
            "skill://a/",
            "skill://",
            "skill://a/%zz",
            "skill://a/%4",
            "skill://a/%+1",
            "skill://a/%-1",
            "skill://a/%00",
            "skill://a/%ff",
            "skill://a/b?x=1",
            "file:///etc/passwd",
        ] {
            assert_eq!(parse(uri), None, "{uri}");
        }
    }
}
