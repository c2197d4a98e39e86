//! Skills read from a directory: the walk that never leaves the root, the
//! metadata fingerprint that tells whether anything changed, and the reading
//! of each file once.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::{Checked, MAX_BYTES_PER_SKILL, MAX_DEPTH, MAX_FILES_PER_SKILL, SKILL_MD, Skill};
use super::{SkillError, check, lock, uri};

/// Most entries one walk visits; past it the walk stops (warned) and serves
/// what it found.
const MAX_ENTRIES: usize = 100_000;

/// One file found by the walk: its path below the root (`/`-separated), the
/// path to open, and the metadata the fingerprint compares.
#[derive(Clone, Debug, PartialEq)]
struct Found {
    rel: String,
    open: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

#[derive(Default)]
struct State {
    fingerprint: Option<Vec<Found>>,
    skills: Vec<Arc<Checked>>,
}

/// A skills directory and what was last read from it.
pub(crate) struct Disk {
    root: PathBuf,
    state: Mutex<State>,
}

impl Disk {
    /// The directory `root` (resolved once: every path served must resolve
    /// inside it).
    pub(crate) fn open(root: &Path) -> Result<Disk, SkillError> {
        let root = root.canonicalize().map_err(|source| SkillError::Io {
            path: root.to_owned(),
            source,
        })?;
        if !root.is_dir() {
            return Err(SkillError::Io {
                path: root,
                source: std::io::Error::other("not a directory"),
            });
        }
        Ok(Disk {
            root,
            state: Mutex::new(State::default()),
        })
    }

    /// The skills read last.
    pub(crate) fn skills(&self) -> Vec<Arc<Checked>> {
        lock(&self.state).skills.clone()
    }

    /// Walks the directory; when the fingerprint differs from the last one,
    /// reads the skills again. Fails only when the root cannot be read.
    pub(crate) fn refresh(&self) -> Result<(), SkillError> {
        let found = self.walk()?;
        if lock(&self.state).fingerprint.as_ref() == Some(&found) {
            return Ok(());
        }
        let skills = self.read(&found);
        let mut state = lock(&self.state);
        state.fingerprint = Some(found);
        state.skills = skills;
        Ok(())
    }

    fn walk(&self) -> Result<Vec<Found>, SkillError> {
        let mut out = Vec::new();
        let mut visited = 0usize;
        let entries = sorted_entries(&self.root).map_err(|source| SkillError::Io {
            path: self.root.clone(),
            source,
        })?;
        self.walk_dir(entries, "", 0, &mut visited, &mut out);
        Ok(out)
    }

    fn walk_dir(
        &self,
        entries: Vec<std::fs::DirEntry>,
        prefix: &str,
        depth: usize,
        visited: &mut usize,
        out: &mut Vec<Found>,
    ) {
        for entry in entries {
            *visited += 1;
            if *visited > MAX_ENTRIES {
                if *visited == MAX_ENTRIES + 1 {
                    tracing::warn!(root = %self.root.display(), limit = MAX_ENTRIES,
                        "skills: too many entries; the rest of the directory is not served");
                }
                return;
            }
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.starts_with('.') || !uri::safe_segment(&name) {
                continue;
            }
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let (open, meta) = if meta.file_type().is_symlink() {
                // A link is served only when it resolves to a file inside
                // the root; a linked directory is not followed.
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                if !target.starts_with(&self.root) {
                    tracing::warn!(path = %path.display(), target = %target.display(),
                        "skills: a symbolic link leads outside the skills root; not served");
                    continue;
                }
                let Ok(meta) = std::fs::metadata(&target) else {
                    continue;
                };
                if !meta.is_file() {
                    continue;
                }
                (target, meta)
            } else {
                (path, meta)
            };
            if meta.is_dir() {
                if depth + 1 >= MAX_DEPTH {
                    tracing::warn!(path = %open.display(), "skills: deeper than the depth limit; not served");
                    continue;
                }
                if let Ok(children) = sorted_entries(&open) {
                    self.walk_dir(children, &rel, depth + 1, visited, out);
                }
            } else if meta.is_file() {
                out.push(Found {
                    rel,
                    open,
                    len: meta.len(),
                    modified: meta.modified().ok(),
                });
            }
        }
    }

    /// Reads and checks every skill of `found` (each file once).
    fn read(&self, found: &[Found]) -> Vec<Arc<Checked>> {
        let skill_dirs: Vec<&str> = found
            .iter()
            .filter_map(|f| f.rel.strip_suffix(SKILL_MD))
            .filter_map(|d| d.strip_suffix('/'))
            .collect();
        if found.iter().any(|f| f.rel == SKILL_MD) {
            tracing::warn!(root = %self.root.display(),
                "skills: a SKILL.md at the root itself has no skill path; put each skill in a directory of its name");
        }
        let mut bytes_of: HashMap<&str, Arc<[u8]>> = HashMap::new();
        let mut out = Vec::new();
        for dir in skill_dirs {
            let prefix = format!("{dir}/");
            let files: Vec<&Found> = found
                .iter()
                .filter(|f| f.rel.starts_with(&prefix))
                .collect();
            let listed: u64 = files.iter().map(|f| f.len).sum();
            if files.len() > MAX_FILES_PER_SKILL || listed > MAX_BYTES_PER_SKILL {
                tracing::warn!(skill = %dir, files = files.len(), bytes = listed,
                    "skills: over the extension's limits (512 files, 16 MiB); not served");
                continue;
            }
            let mut skill = Skill::new(dir);
            let mut failed = false;
            for f in files {
                let bytes = match bytes_of.get(f.rel.as_str()) {
                    Some(b) => b.clone(),
                    None => match read_bounded(&f.open) {
                        Ok(b) => {
                            bytes_of.insert(&f.rel, b.clone());
                            b
                        }
                        Err(e) => {
                            tracing::warn!(path = %f.open.display(), error = %e,
                                "skills: cannot read a file; its skill is not served");
                            failed = true;
                            break;
                        }
                    },
                };
                skill.files.insert(f.rel[prefix.len()..].to_owned(), bytes);
            }
            if failed {
                continue;
            }
            match check(&skill) {
                Ok(checked) => out.push(Arc::new(checked)),
                Err(e) => tracing::warn!(skill = %dir, error = %e, "skills: not served"),
            }
        }
        out
    }
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<std::fs::DirEntry>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    Ok(entries)
}

/// A file's bytes, at most [`MAX_BYTES_PER_SKILL`] + 1 of them (a file that
/// grew past the limit then fails the skill's check instead of filling memory).
fn read_bounded(path: &Path) -> std::io::Result<Arc<[u8]>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_BYTES_PER_SKILL + 1)
        .read_to_end(&mut buf)?;
    Ok(Arc::from(buf))
}
