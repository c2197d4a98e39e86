//! What the skills extension answers: skill entries (`skills/list`,
//! `skills/get`), directory children (`resources/directory/read`), and the
//! `skill://` resources (`resources/list`, `resources/read`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{DIRECTORY_MIME, MAX_BYTES_PER_SKILL, SKILL_MD, Skills, Snapshot, uri};
use crate::mux::Channel;
use crate::protocol::{CacheHint, McpError};
use crate::suite::common::{BoxFuture, ResourceContents};
use crate::suite::resources::{ReadOutcome, Resource, ResourceProvider, ResourceRead};

/// The files below `dir` (full paths starting with `dir/`), in path order.
fn below<'s>(
    snapshot: &'s Snapshot,
    dir: &str,
) -> impl Iterator<Item = (&'s String, &'s std::sync::Arc<super::SkillFile>)> + 's {
    let prefix = format!("{dir}/");
    snapshot
        .files
        .range::<String, _>((Bound::Included(prefix.clone()), Bound::Unbounded))
        .take_while(move |(p, _)| p.starts_with(&prefix))
}

/// The entry of the skill at `path`: `uri`, verbatim `frontmatter`, and every
/// file below it with digest and size, or `"dynamic"` for a dynamic skill.
fn entry(snapshot: &Snapshot, path: &str) -> Option<Value> {
    let skill = snapshot.skills.get(path)?;
    let resources = if skill.dynamic.is_some() {
        Value::from("dynamic")
    } else {
        below(snapshot, path)
            .map(|(p, f)| json!({"uri": uri::to_uri(p), "digest": f.digest, "size": f.size()}))
            .collect()
    };
    Some(json!({
        "uri": uri::to_uri(&format!("{path}/{SKILL_MD}")),
        "frontmatter": Value::Object(skill.frontmatter.clone()),
        "resources": resources,
    }))
}

fn no_skill(uri: &str) -> McpError {
    McpError::invalid_params_with(
        format!("No skill is served at {uri}"),
        json!({ "uri": uri }),
    )
}

/// The answers of one set, built once: every skill entry and every
/// directory's children (requests then only page through them).
pub(crate) struct Derived {
    /// The `skills/list` entries, in path order.
    entries: Vec<Value>,
    /// Index in `entries` of each skill path.
    entry_at: BTreeMap<String, usize>,
    /// The children (`resources/directory/read`) of every directory holding
    /// a file served.
    children: BTreeMap<String, Vec<Value>>,
}

impl Snapshot {
    /// The answers of this set (built at the first call).
    fn derived(&self) -> &Derived {
        self.derived.get_or_init(|| self.derive())
    }

    fn derive(&self) -> Derived {
        let mut entries = Vec::with_capacity(self.skills.len());
        let mut entry_at = BTreeMap::new();
        for path in self.skills.keys() {
            if let Some(e) = entry(self, path) {
                entry_at.insert(path.clone(), entries.len());
                entries.push(e);
            }
        }
        // Files are in path order, so each directory's children come in
        // order, a subdirectory once (where its first file is).
        let mut children: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut last_sub: BTreeMap<String, String> = BTreeMap::new();
        for (path, file) in &self.files {
            let mut dir = path.as_str();
            let mut child = path.as_str();
            let mut is_file = true;
            while let Some((parent, name)) = dir.rsplit_once('/') {
                let list = children.entry(parent.to_owned()).or_default();
                if is_file {
                    list.push(json!({
                        "uri": uri::to_uri(child),
                        "name": name,
                        "mimeType": file.mime,
                        "size": file.size(),
                    }));
                } else if last_sub.get(parent).map(String::as_str) != Some(name) {
                    last_sub.insert(parent.to_owned(), name.to_owned());
                    list.push(json!({
                        "uri": uri::to_uri(child),
                        "name": name,
                        "mimeType": DIRECTORY_MIME,
                    }));
                }
                is_file = false;
                dir = parent;
                child = parent;
            }
        }
        Derived {
            entries,
            entry_at,
            children,
        }
    }

    /// Every skill entry, in path order (the suite paginates; an entry is
    /// never split).
    pub(crate) fn entries(&self) -> &[Value] {
        &self.derived().entries
    }

    /// The children of the directory `dir` (a path from [`Skills::directory`]).
    pub(crate) fn children(&self, dir: &str) -> &[Value] {
        self.derived().children.get(dir).map_or(&[], Vec::as_slice)
    }
}

impl Skills {
    /// The entry `skills/get` answers for `params.uri`: `-32602` when it is not
    /// the `SKILL.md` of a skill served.
    pub(crate) fn get(&self, params: &Map<String, Value>) -> Result<Value, McpError> {
        let Some(Value::String(requested)) = params.get("uri") else {
            return Err(McpError::invalid_params(
                "Invalid params: skills/get requires a string uri",
            ));
        };
        let path = uri::parse(requested).ok_or_else(|| no_skill(requested))?;
        let skill = path
            .strip_suffix(SKILL_MD)
            .and_then(|p| p.strip_suffix('/'))
            .ok_or_else(|| no_skill(requested))?;
        let snapshot = self.snapshot();
        let derived = snapshot.derived();
        derived
            .entry_at
            .get(skill)
            .and_then(|&i| derived.entries.get(i))
            .cloned()
            .ok_or_else(|| no_skill(requested))
    }

    /// The directory `params.uri` names and the set to read its children
    /// from ([`Snapshot::children`]; files with their resource metadata,
    /// subdirectories as `inode/directory`); the path is what its cursors are
    /// bound to. `-32602` when it is not a directory served.
    pub(crate) fn directory(
        &self,
        params: &Map<String, Value>,
    ) -> Result<(String, Arc<Snapshot>), McpError> {
        let Some(Value::String(requested)) = params.get("uri") else {
            return Err(McpError::invalid_params(
                "Invalid params: resources/directory/read requires a string uri",
            ));
        };
        let not_dir = || {
            McpError::invalid_params_with(
                format!("{requested} is not a directory resource"),
                json!({ "uri": requested }),
            )
        };
        let dir = uri::parse(requested).ok_or_else(not_dir)?;
        let snapshot = self.snapshot();
        if snapshot.children(&dir).is_empty() {
            return Err(not_dir());
        }
        Ok((dir, snapshot))
    }
}

/// The contents of a read: text when `bytes` are UTF-8, else a base64 blob.
fn contents(uri: String, mime: &str, bytes: &[u8]) -> ResourceContents {
    match std::str::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(uri, mime, text),
        Err(_) => ResourceContents::blob(uri, mime, data_encoding::BASE64.encode(bytes)),
    }
}

/// The `skill://` resources of a [`Skills`], as a resource provider of the
/// suite's catalog: each `SKILL.md` listed (name and description from its
/// front matter), every file readable.
pub(crate) struct SkillsProvider(pub(crate) Skills);

impl ResourceProvider for SkillsProvider {
    fn prefix(&self) -> &str {
        uri::SCHEME
    }

    fn list(&self, _channel: &Channel) -> BoxFuture<Result<Vec<Resource>, McpError>> {
        let snapshot = self.0.snapshot();
        let list = snapshot
            .skills
            .iter()
            .filter_map(|(path, skill)| {
                let md = format!("{path}/{SKILL_MD}");
                let file = snapshot.files.get(&md)?;
                let text = |k: &str| skill.frontmatter.get(k).and_then(Value::as_str);
                let mut r = Resource::new(uri::to_uri(&md), text("name").unwrap_or_default())
                    .mime_type(file.mime.clone())
                    .size(file.size());
                if let Some(d) = text("description") {
                    r = r.description(d);
                }
                Some(r)
            })
            .collect();
        Box::pin(async move { Ok(list) })
    }

    fn read(&self, read: ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>> {
        let snapshot = self.0.snapshot();
        let Some(path) = uri::parse(&read.uri) else {
            return Box::pin(async { Ok(ReadOutcome::NotFound) });
        };
        if let Some(file) = snapshot.files.get(&path) {
            let contents = contents(read.uri, &file.mime, &file.bytes);
            return Box::pin(async move { Ok(contents.into()) });
        }
        let Some((skill, produce)) = snapshot.producer_of(&path) else {
            return Box::pin(async { Ok(ReadOutcome::NotFound) });
        };
        let rel = path[skill.len() + 1..].to_owned();
        let produced = produce(rel.clone());
        Box::pin(async move {
            let Some(bytes) = produced.await? else {
                return Ok(ReadOutcome::NotFound);
            };
            if bytes.len() as u64 > MAX_BYTES_PER_SKILL {
                tracing::error!(uri = %read.uri, bytes = bytes.len(),
                    "skills: a dynamic file over 16 MiB; not served");
                return Err(McpError::internal(format!(
                    "{} is larger than {MAX_BYTES_PER_SKILL} bytes",
                    read.uri
                )));
            }
            let mime = super::mime_of(&rel, &bytes);
            Ok(contents(read.uri, &mime, &bytes).into())
        })
    }

    fn cache(&self) -> Option<CacheHint> {
        self.0.cache_hint()
    }
}
