//! The YAML front matter of a `SKILL.md`, as the JSON object a skill entry
//! carries verbatim (`frontmatter`), and the Agent Skills naming rules.

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde_json::{Map, Number, Value};

use super::SkillError;

/// The most front matter read from one `SKILL.md` (bytes between the `---`
/// lines); a longer block is refused.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// How deep the front matter's maps and lists may nest.
const MAX_DEPTH: usize = 32;

/// The front matter of `text` (a `SKILL.md`) as a JSON object, with `name`
/// and `description` checked: the leading `---` line, the YAML, the closing
/// `---` line. A missing block, invalid YAML, a non-mapping, a key that is not
/// a string or a tag are refused (aliases are expanded, within the parser's
/// budget of 100,000 nodes).
pub(crate) fn parse(text: &str) -> Result<Map<String, Value>, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let bad = |why: &str| SkillError::Frontmatter(why.to_owned());
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| bad("SKILL.md does not begin with a --- line"))?;
    // The block ends at the first line that is `---` (trailing blanks allowed).
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line
            .trim_end_matches(['\n', '\r'])
            .trim_end_matches([' ', '\t'])
            == "---"
        {
            end = Some(offset);
            break;
        }
        offset += line.len();
    }
    let end = end.ok_or_else(|| bad("the front matter has no closing --- line"))?;
    if end > MAX_FRONTMATTER_BYTES {
        return Err(bad("the front matter is longer than 64 KiB"));
    }
    let docs = Yaml::load_from_str(&rest[..end]).map_err(|e| bad(&format!("invalid YAML: {e}")))?;
    let value = match docs.as_slice() {
        [doc] => to_json(doc, 0)?,
        _ => return Err(bad("the front matter must be one YAML mapping")),
    };
    let Value::Object(map) = value else {
        return Err(bad("the front matter must be a YAML mapping"));
    };
    for field in ["name", "description"] {
        match map.get(field) {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => {
                return Err(bad(&format!(
                    "the front matter needs a non-empty `{field}`"
                )));
            }
        }
    }
    Ok(map)
}

fn to_json(node: &Yaml<'_>, depth: usize) -> Result<Value, SkillError> {
    let bad = |why: &str| SkillError::Frontmatter(why.to_owned());
    if depth > MAX_DEPTH {
        return Err(bad("the front matter nests too deep"));
    }
    Ok(match node {
        Yaml::Value(scalar) => match scalar {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Bool(*b),
            Scalar::Integer(i) => Value::from(*i),
            Scalar::FloatingPoint(f) => Number::from_f64(f.into_inner())
                .map(Value::Number)
                .ok_or_else(|| bad("a number in the front matter is not finite"))?,
            Scalar::String(s) => Value::String(s.to_string()),
        },
        Yaml::Sequence(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                let key = match k {
                    Yaml::Value(Scalar::String(s)) => s.to_string(),
                    _ => return Err(bad("a front matter key is not a string")),
                };
                map.insert(key, to_json(v, depth + 1)?);
            }
            Value::Object(map)
        }
        Yaml::Representation(..) | Yaml::Tagged(..) | Yaml::Alias(_) | Yaml::BadValue => {
            return Err(bad(
                "the front matter uses a tag, an alias or an invalid value",
            ));
        }
    })
}

/// Whether `name` follows the Agent Skills naming rules: 1-64 characters,
/// lowercase ASCII letters, digits and hyphens, no hyphen first, last or twice
/// in a row.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn front_matter_becomes_the_json_object_verbatim() {
        let text = "---\nname: pdf-processing\ndescription: Extract PDFs\nlicense: MIT\nmetadata:\n  version: \"2.1\"\n  tags: [a, b]\n  n: 3\n---\n# Body\n";
        assert_eq!(
            Value::Object(parse(text).unwrap()),
            json!({"name": "pdf-processing", "description": "Extract PDFs", "license": "MIT",
                   "metadata": {"version": "2.1", "tags": ["a", "b"], "n": 3}})
        );
    }

    #[test]
    fn missing_or_broken_front_matter_is_refused() {
        for text in [
            "# no front matter\n",
            "---\nname: a\ndescription: b\n",
            "---\nname: a\n---\n",
            "---\nname: ''\ndescription: b\n---\n",
            "---\n[1, 2]\n---\n",
            "---\nname: !!binary aGk=\ndescription: b\n---\n",
            "---\n? [1]\n: x\nname: a\ndescription: b\n---\n",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn naming_rules() {
        for ok in ["a", "pdf-processing", "x1-y2", &"a".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
