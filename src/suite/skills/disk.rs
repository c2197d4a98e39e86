//! Skills read from a directory: the walk that never leaves the root, the
//! metadata fingerprint that tells whether anything changed, and the reading
//! of each file once, within the catalog's memory budget.
//!
//! A file is opened without following a final symbolic link and without
//! blocking (a FIFO put in place of a file is not waited on), and served only
//! when the open handle is the regular file the walk saw (same device and
//! inode): a file swapped for a link out of the root between the walk and the
//! read is not served. Files unchanged since the last read (same metadata) are
//! not read again: their bytes are shared with the set served before.

use std::collections::{BTreeMap, HashMap};
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
/// path to open, and the metadata the fingerprint compares (size,
/// modification and change times, device and inode: a file replaced by
/// another of the same size and time is still seen as changed).
#[derive(Clone, Debug, PartialEq)]
struct Found {
    rel: String,
    open: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    id: FileId,
}

/// Device, inode and change time (`ctime`, seconds and nanoseconds) of a
/// file; zeros where the platform has none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct FileId {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl FileId {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt as _;
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    #[cfg(not(unix))]
    fn of(_meta: &std::fs::Metadata) -> FileId {
        FileId::default()
    }

    /// Whether an open handle's metadata is the file the walk saw.
    fn same_file(&self, meta: &std::fs::Metadata) -> bool {
        let other = FileId::of(meta);
        self.dev == other.dev && self.ino == other.ino
    }
}

/// The bytes of one file as last read, with the metadata they were read at.
type Held = HashMap<String, (Found, Arc<[u8]>)>;

#[derive(Default)]
struct State {
    fingerprint: Option<Vec<Found>>,
    /// The budget the skills were read within.
    budget: u64,
    skills: Vec<Arc<Checked>>,
    /// The files of `skills`, by path below the root (each once).
    held: Held,
}

/// A skills directory and what was last read from it.
pub(crate) struct Disk {
    root: PathBuf,
    state: Mutex<State>,
    /// Held across a whole refresh: two refreshes never interleave.
    refreshing: Mutex<()>,
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
            refreshing: Mutex::new(()),
        })
    }

    /// The skills read last.
    pub(crate) fn skills(&self) -> Vec<Arc<Checked>> {
        lock(&self.state).skills.clone()
    }

    /// The bytes held for the skills read last (each file once).
    #[cfg(test)]
    fn held_bytes(&self) -> u64 {
        lock(&self.state)
            .held
            .values()
            .map(|(_, b)| b.len() as u64)
            .sum()
    }

    /// Walks the directory; when the fingerprint (or `budget`) differs from
    /// the last one, reads the skills again, holding at most `budget` bytes
    /// of files in all (the skills past it, in path order, are not served).
    /// Fails only when the root cannot be read.
    pub(crate) fn refresh(&self, budget: u64) -> Result<(), SkillError> {
        let _one = lock(&self.refreshing);
        let found = self.walk()?;
        let previous = {
            let state = lock(&self.state);
            if state.fingerprint.as_ref() == Some(&found) && state.budget == budget {
                return Ok(());
            }
            state.held.clone()
        };
        let (skills, held) = self.read(&found, &previous, budget);
        drop(previous);
        let mut state = lock(&self.state);
        state.fingerprint = Some(found);
        state.budget = budget;
        state.skills = skills;
        state.held = held;
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
                let Ok(meta) = std::fs::symlink_metadata(&target) else {
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
                    id: FileId::of(&meta),
                });
            }
        }
    }

    /// Reads and checks every skill of `found` (each file once; a file
    /// unchanged since `previous` is not read again), holding at most
    /// `budget` bytes: returns the skills and the files they hold.
    fn read(&self, found: &[Found], previous: &Held, budget: u64) -> (Vec<Arc<Checked>>, Held) {
        let by_rel: BTreeMap<&str, &Found> = found.iter().map(|f| (f.rel.as_str(), f)).collect();
        let skill_dirs: Vec<&str> = by_rel
            .keys()
            .filter_map(|rel| rel.strip_suffix(SKILL_MD))
            .filter_map(|d| d.strip_suffix('/'))
            .collect();
        if by_rel.contains_key(SKILL_MD) {
            tracing::warn!(root = %self.root.display(),
                "skills: a SKILL.md at the root itself has no skill path; put each skill in a directory of its name");
        }
        let mut held: Held = HashMap::new();
        let mut held_bytes = 0u64;
        let mut out = Vec::new();
        for dir in skill_dirs {
            let prefix = format!("{dir}/");
            let files: Vec<&Found> = by_rel
                .range(prefix.as_str()..)
                .take_while(|(rel, _)| rel.starts_with(&prefix))
                .map(|(_, f)| *f)
                .collect();
            let listed: u64 = files.iter().map(|f| f.len).sum();
            if files.len() > MAX_FILES_PER_SKILL || listed > MAX_BYTES_PER_SKILL {
                tracing::warn!(skill = %dir, files = files.len(), bytes = listed,
                    "skills: over the extension's limits (512 files, 16 MiB); not served");
                continue;
            }
            let mut skill = Skill::new(dir);
            let mut skill_bytes = 0u64;
            let mut added: Vec<&str> = Vec::new();
            let mut failed = None;
            for f in files {
                let bytes = if let Some((_, b)) = held.get(&f.rel) {
                    // A file of a nested skill, already held.
                    b.clone()
                } else {
                    let left_total = budget.saturating_sub(held_bytes);
                    let left_skill = MAX_BYTES_PER_SKILL.saturating_sub(skill_bytes);
                    let read = match previous.get(&f.rel) {
                        Some((was, b)) if was == f => Ok(b.clone()),
                        _ => read_bounded(f, left_total.min(left_skill)),
                    };
                    match read {
                        Ok(b) if b.len() as u64 <= left_total => {
                            held_bytes += b.len() as u64;
                            held.insert(f.rel.clone(), (f.clone(), b.clone()));
                            added.push(&f.rel);
                            b
                        }
                        Ok(_) => {
                            failed = Some(format!(
                                "over the total bytes limit ({budget}) of the skills in memory"
                            ));
                            break;
                        }
                        Err(e) => {
                            failed = Some(format!("{}: {e}", f.open.display()));
                            break;
                        }
                    }
                };
                skill_bytes += bytes.len() as u64;
                skill.files.insert(f.rel[prefix.len()..].to_owned(), bytes);
            }
            let checked = match failed {
                Some(why) => Err(SkillError::Limit(why)),
                None => check(&skill),
            };
            match checked {
                Ok(checked) => out.push(Arc::new(checked)),
                Err(e) => {
                    tracing::warn!(skill = %dir, error = %e, "skills: not served");
                    drop(skill);
                    for rel in added {
                        if let Some((_, b)) = held.remove(rel) {
                            held_bytes -= b.len() as u64;
                        }
                    }
                }
            }
        }
        (out, held)
    }
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<std::fs::DirEntry>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    Ok(entries)
}

/// The bytes of `f`, at most `limit` + 1 of them (a file that grew past the
/// limit then fails the skill's check, or the budget, instead of filling
/// memory). Opened without following a final symbolic link and without
/// blocking; refused unless the handle is the regular file the walk saw.
fn read_bounded(f: &Found, limit: u64) -> std::io::Result<Arc<[u8]>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(&f.open)?;
    let meta = file.metadata()?;
    if !meta.is_file() || !f.id.same_file(&meta) {
        return Err(std::io::Error::other(
            "not the regular file the directory walk found (replaced meanwhile)",
        ));
    }
    let mut buf = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    Ok(Arc::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::skills::Skills;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("genmcp-unit-skills-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn skill_at(root: &Path, name: &str, body: &str) {
        write(
            &root.join(format!("{name}/SKILL.md")),
            &format!("---\nname: {name}\ndescription: d\n---\n"),
        );
        write(&root.join(format!("{name}/body.md")), body);
    }

    #[test]
    fn the_memory_budget_bounds_what_a_directory_read_holds() {
        let root = tempdir("budget");
        for name in ["a", "b", "c"] {
            skill_at(&root, name, &"x".repeat(1000));
        }
        let skills = Skills::from_dir(&root).unwrap();
        let disk = skills.inner.disk.as_ref().unwrap();
        assert_eq!(skills.len(), 3);
        let all = disk.held_bytes();
        assert!(all > 3000, "{all}");
        // Two skills fit: the third is neither served nor held.
        let skills = skills.max_total_bytes(2200);
        let disk = skills.inner.disk.as_ref().unwrap();
        assert_eq!(skills.uris(), ["skill://a/SKILL.md", "skill://b/SKILL.md"]);
        assert!(disk.held_bytes() <= 2200, "{}", disk.held_bytes());
        // A file that grew after the walk is read no further than the budget.
        let found = disk.walk().unwrap();
        write(&root.join("a/body.md"), &"y".repeat(1 << 20));
        let (read, held) = disk.read(&found, &Held::new(), 2200);
        let held: u64 = held.values().map(|(_, b)| b.len() as u64).sum();
        assert!(held <= 2200, "{held}");
        assert_eq!(read.len(), 2, "a no longer fits; b and c do");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_swapped_for_a_link_or_a_fifo_after_the_walk_is_not_served() {
        let base = tempdir("swap");
        let root = base.join("skills");
        write(&base.join("secret.txt"), "TOP SECRET\n");
        skill_at(&root, "a", "inside\n");
        skill_at(&root, "b", "inside\n");
        let skills = Skills::from_dir(&root).unwrap();
        let disk = skills.inner.disk.as_ref().unwrap();
        let found = disk.walk().unwrap();
        std::fs::remove_file(root.join("a/body.md")).unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("a/body.md")).unwrap();
        std::fs::remove_file(root.join("b/body.md")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("b/body.md"))
            .status()
            .unwrap();
        assert!(fifo.success());
        // (Without O_NONBLOCK this read would wait for a writer forever.)
        let (read, held) = disk.read(&found, &Held::new(), u64::MAX);
        assert!(
            read.is_empty(),
            "{:?}",
            read.iter().map(|c| &c.path).collect::<Vec<_>>()
        );
        assert!(held.is_empty());
        let _ = std::fs::remove_dir_all(&base);
    }
}
