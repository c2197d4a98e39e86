//! Resource templates (RFC 6570): what `resources/templates/list` lists, and
//! the single-pass matcher `resources/read` uses to route a URI to a template
//! (level 1 `{var}` and level 2 `{+var}`).

use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// `{var}` (no `/`, `?`, `#`) or `{+var}` (reserved: `/` allowed).
    Var {
        name: String,
        reserved: bool,
    },
    /// An expression this matcher does not support: the template never matches.
    Unsupported,
}

/// A resource template (RFC 6570), listed by `resources/templates/list` and
/// matched on `resources/read`.
///
/// Matching supports level 1 `{var}` (a non-empty value without `/`, `?` or `#`,
/// percent-decoded; escapes that do not decode to valid UTF-8 are no match) and level 2 `{+var}` (may contain `/`). Templates with other
/// operators are listed but never match.
///
/// ```
/// use genmcp::suite::ResourceTemplate;
/// let t = ResourceTemplate::new("test://template/{id}/data", "data");
/// let vars = t.matches("test://template/12%2033/data").unwrap();
/// assert_eq!(vars["id"], "12 33");
/// assert!(t.matches("test://template/1/2/data").is_none());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The RFC 6570 template.
    pub uri_template: String,
    /// Programmatic name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// MIME type of the resources it expands to.
    pub mime_type: Option<String>,
    /// Other fields, served as given.
    pub extra: Map<String, Value>,
    parts: Vec<Part>,
}

fn parse_template(template: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_owned()));
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            parts.push(Part::Unsupported);
            return parts;
        };
        let expr = &after[..close];
        let (reserved, name) = match expr.strip_prefix('+') {
            Some(n) => (true, n),
            None => (false, expr),
        };
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'%');
        parts.push(if valid {
            Part::Var {
                name: name.to_owned(),
                reserved,
            }
        } else {
            Part::Unsupported
        });
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    parts
}

/// Percent-decodes `s`; `None` when the decoded bytes are not valid UTF-8
/// (such a value matches no variable: falling back to the raw text would let
/// an encoded `/` through the "no `/` in a `{var}`" rule).
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Longest URI matched against templates; longer URIs match no template.
pub const MAX_TEMPLATE_URI_LEN: usize = 8 * 1024;

/// Matches `uri` against the template parts in one pass, without backtracking: a
/// (non-empty) variable ends where the next literal starts (its first occurrence for `{var}`,
/// its last for `{+var}`), and never past `?` or `#` (nor `/` for `{var}`).
/// Values are percent-decoded after the whole URI matched; a value whose escapes
/// do not decode to valid UTF-8, or a `{var}` value that decodes to something
/// containing `/`, does not match.
fn match_parts(parts: &[Part], mut uri: &str, vars: &mut Vec<(String, String)>) -> bool {
    let mut raw: Vec<(&str, &str, bool)> = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        match &parts[i] {
            Part::Literal(lit) => match uri.strip_prefix(lit.as_str()) {
                Some(tail) => uri = tail,
                None => return false,
            },
            Part::Unsupported => return false,
            Part::Var { name, reserved } => {
                let stop = |c: char| c == '?' || c == '#' || (!reserved && c == '/');
                let max = uri.find(stop).unwrap_or(uri.len());
                let end = match parts.get(i + 1) {
                    Some(Part::Literal(lit)) => {
                        let found = if *reserved {
                            // The window may end inside a multi-byte character: a
                            // match of `lit` ends on a boundary, so round down.
                            let mut window = (max + lit.len()).min(uri.len());
                            while !uri.is_char_boundary(window) {
                                window -= 1;
                            }
                            uri.get(..window).and_then(|w| w.rfind(lit.as_str()))
                        } else {
                            uri.find(lit.as_str())
                        };
                        match found {
                            Some(pos) if pos <= max => pos,
                            _ => return false,
                        }
                    }
                    // Last part, or another variable right after: take all it may.
                    _ => max,
                };
                if end == 0 {
                    return false; // a variable matches a non-empty value
                }
                // `end` is a match position or a `find` result: a char boundary.
                let (Some(value), Some(tail)) = (uri.get(..end), uri.get(end..)) else {
                    return false;
                };
                raw.push((name.as_str(), value, *reserved));
                uri = tail;
            }
        }
        i += 1;
    }
    if !uri.is_empty() {
        return false;
    }
    for (name, value, reserved) in raw {
        let Some(decoded) = percent_decode(value) else {
            return false;
        };
        if !reserved && decoded.contains('/') {
            return false;
        }
        vars.push((name.to_owned(), decoded));
    }
    true
}

impl ResourceTemplate {
    /// A template with a name.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        let uri_template = uri_template.into();
        let parts = parse_template(&uri_template);
        ResourceTemplate {
            uri_template,
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            extra: Map::new(),
            parts,
        }
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Adds another field.
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The variable names, in order.
    pub fn variables(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Var { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The variables of `uri` if it matches this template.
    pub fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        if uri.len() > MAX_TEMPLATE_URI_LEN {
            return None;
        }
        let mut vars = Vec::new();
        if !match_parts(&self.parts, uri, &mut vars) {
            return None;
        }
        Some(
            vars.into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    }

    /// The `ResourceTemplate` object as served.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("uriTemplate".into(), Value::from(self.uri_template.clone()));
        map.insert("name".into(), Value::from(self.name.clone()));
        if let Some(t) = &self.title {
            map.insert("title".into(), Value::from(t.clone()));
        }
        if let Some(d) = &self.description {
            map.insert("description".into(), Value::from(d.clone()));
        }
        if let Some(m) = &self.mime_type {
            map.insert("mimeType".into(), Value::from(m.clone()));
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_level_one_and_reserved() {
        let t = ResourceTemplate::new("test://template/{id}/data", "d");
        assert_eq!(t.variables(), vec!["id"]);
        assert_eq!(t.matches("test://template/123/data").unwrap()["id"], "123");
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/123/data/x").is_none());
        assert!(t.matches("other://template/123/data").is_none());
        let two = ResourceTemplate::new("db://{table}/{row}", "r");
        let v = two.matches("db://users/42").unwrap();
        assert_eq!(
            (v["table"].as_str(), v["row"].as_str()),
            (Some("users"), Some("42"))
        );
        let path = ResourceTemplate::new("file:///{+path}", "f");
        assert_eq!(
            path.matches("file:///a/b/c.txt").unwrap()["path"],
            "a/b/c.txt"
        );
        let bad = ResourceTemplate::new("x://{?q}", "q");
        assert!(bad.matches("x://?q=1").is_none());
        assert_eq!(
            t.to_json(),
            serde_json::json!({"uriTemplate": "test://template/{id}/data", "name": "d"})
        );
        assert_eq!(percent_decode("a%2Fb%zz%4").as_deref(), Some("a/b%zz%4"));
    }

    #[test]
    fn a_simple_variable_never_decodes_to_a_path() {
        let t = ResourceTemplate::new("file:///{name}", "f");
        assert!(t.matches("file:///..%2F..%2Fetc%2Fpasswd").is_none());
        assert_eq!(t.matches("file:///a%20b").unwrap()["name"], "a b");
        let suffix = ResourceTemplate::new("file:///{+dir}/{name}.txt", "t");
        let v = suffix.matches("file:///a/b.c/d.e.txt").unwrap();
        assert_eq!(
            (v["dir"].as_str(), v["name"].as_str()),
            (Some("a/b.c"), Some("d.e"))
        );
    }

    #[test]
    fn a_variable_that_does_not_decode_to_utf8_is_no_match() {
        let t = ResourceTemplate::new("test://template/{id}/data", "d");
        assert!(t.matches("test://template/..%2F..%2Fetc%FF/data").is_none());
        assert!(t.matches("test://template/%FF/data").is_none());
        assert!(t.matches("test://template/%C3/data").is_none());
        assert_eq!(t.matches("test://template/%C3%A9/data").unwrap()["id"], "é");
        let path = ResourceTemplate::new("file:///{+path}", "f");
        assert!(path.matches("file:///a/%FF").is_none());
        assert_eq!(path.matches("file:///a/%2F").unwrap()["path"], "a//");
    }

    #[test]
    fn multi_byte_characters_after_a_reserved_variable_do_not_match_or_panic() {
        let t = ResourceTemplate::new("x://{+p}.txt", "t");
        assert!(t.matches("x://a?éé").is_none());
        assert!(t.matches("x://a?é.txt").is_none());
        assert_eq!(t.matches("x://é/ü.txt").unwrap()["p"], "é/ü");
        let t = ResourceTemplate::new("x://{+p}€{q}", "t");
        assert!(t.matches("x://a?€€€").is_none());
        assert_eq!(t.matches("x://ab€c").unwrap()["q"], "c");
    }

    #[test]
    fn matching_is_single_pass_on_long_adversarial_uris() {
        // With backtracking this is cubic in the URI length; single-pass it is not.
        let t = ResourceTemplate::new("file:///{+a}/{+b}.txt", "t");
        let uri = format!("file:///{}", "a".repeat(MAX_TEMPLATE_URI_LEN - 20));
        assert!(t.matches(&uri).is_none());
        assert!(t.matches(&format!("{uri}x")).is_none());
        let too_long = format!("file:///{}/b.txt", "a".repeat(MAX_TEMPLATE_URI_LEN));
        assert!(t.matches(&too_long).is_none());
    }
}
