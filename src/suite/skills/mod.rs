//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): a
//! catalog of Agent Skills served over MCP.
//!
//! A skill is a directory with a `SKILL.md` (YAML front matter with at least
//! `name` and `description`) and the files beside it. [`Skills`] holds them,
//! read from a directory on disk ([`Skills::from_dir`]) or registered in code
//! ([`Skill`], [`Skills::add`]), and a suite given one
//! ([`crate::suite::SuiteBuilder::skills`]) serves:
//!
//! - `skills/list` (paginated, `ttlMs`/`cacheScope`) and `skills/get`: each
//!   entry with its verbatim front matter and every file's `sha256:` digest
//!   and size;
//! - every file as a `skill://<skill-path>/<file-path>` resource through
//!   `resources/read`, and each `SKILL.md` in `resources/list`;
//! - `resources/directory/read` (paginated) when [`Skills::directory_read`]
//!   is on;
//! - the capability `extensions["io.modelcontextprotocol/skills"]` (with
//!   `resources`, which the extension requires).
//!
//! Every file is read once, when the catalog is built or reloaded, and served
//! from memory with the digest computed then: a read always matches its
//! entry, and no request ever touches the file system. A skill registered in
//! code may instead produce its files when they are read
//! ([`Skill::dynamic`]): its entry says `"resources": "dynamic"`. See
//! `docs/skills.md`.

mod disk;
mod frontmatter;
mod serve;
mod uri;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::protocol::{CacheHint, McpError};
use crate::suite::catalog::WeakCatalog;
use crate::suite::common::BoxFuture;

pub use frontmatter::MAX_FRONTMATTER_BYTES;
pub(crate) use serve::SkillsProvider;
pub use uri::SCHEME;

/// The extension identifier, the key of the capability under `extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/skills";
/// `skills/list`.
pub const LIST: &str = "skills/list";
/// `skills/get`.
pub const GET: &str = "skills/get";
/// `resources/directory/read` (served when [`Skills::directory_read`] is on).
pub const DIRECTORY_READ: &str = "resources/directory/read";
/// The MIME type of a directory resource.
pub const DIRECTORY_MIME: &str = "inode/directory";
/// The file every skill has at its root.
pub const SKILL_MD: &str = "SKILL.md";
/// Most files of one skill (the extension's limit); a larger skill is not served.
pub const MAX_FILES_PER_SKILL: usize = 512;
/// Most bytes of one skill, summed over its files (the extension's limit, 16
/// MiB); a larger skill is not served.
pub const MAX_BYTES_PER_SKILL: u64 = 16 * 1024 * 1024;
/// Default of [`Skills::max_total_bytes`]: 256 MiB held in memory in all.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
/// How deep a skills directory is walked; deeper directories are skipped.
pub const MAX_DEPTH: usize = 16;

/// Why a skill or a skills directory was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// The `SKILL.md` front matter is missing or invalid.
    #[error("invalid SKILL.md front matter: {0}")]
    Frontmatter(String),
    /// A skill path or file path that cannot be served (empty, `.`, `..`,
    /// a separator or control character in a segment).
    #[error("invalid path {0:?}")]
    Path(String),
    /// The final segment of the skill path is not the front matter's `name`,
    /// or the name breaks the Agent Skills naming rules.
    #[error("skill {path:?}: {why}")]
    Name {
        /// The skill path.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The skill has no `SKILL.md`, or no text one.
    #[error("skill {0:?} has no UTF-8 SKILL.md")]
    NoSkillMd(String),
    /// Over [`MAX_FILES_PER_SKILL`], [`MAX_BYTES_PER_SKILL`] or
    /// [`Skills::max_total_bytes`].
    #[error("{0}")]
    Limit(String),
    /// Reading the skills directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// One file of a skill, held in memory with its digest.
#[derive(Debug)]
pub(crate) struct SkillFile {
    bytes: Arc<[u8]>,
    /// `sha256:<64 lowercase hex>` of `bytes`.
    digest: String,
    mime: String,
}

impl SkillFile {
    fn new(name: &str, bytes: Arc<[u8]>) -> Self {
        let digest = format!(
            "sha256:{}",
            data_encoding::HEXLOWER.encode(&Sha256::digest(&bytes))
        );
        let mime = mime_of(name, &bytes);
        SkillFile {
            bytes,
            digest,
            mime,
        }
    }

    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The MIME type served for a file, by its extension (`text/plain` for other
/// UTF-8 files, `application/octet-stream` for other binary ones).
fn mime_of(name: &str, bytes: &[u8]) -> String {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let by_ext = match ext.as_deref() {
        Some("md" | "markdown") => Some("text/markdown"),
        Some("txt") => Some("text/plain"),
        Some("py") => Some("text/x-python"),
        Some("sh") => Some("text/x-shellscript"),
        Some("js" | "mjs") => Some("text/javascript"),
        Some("ts") => Some("text/x-typescript"),
        Some("json") => Some("application/json"),
        Some("yaml" | "yml") => Some("application/yaml"),
        Some("html" | "htm") => Some("text/html"),
        Some("csv") => Some("text/csv"),
        Some("xml") => Some("application/xml"),
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("svg") => Some("image/svg+xml"),
        Some("pdf") => Some("application/pdf"),
        _ => None,
    };
    match by_ext {
        Some(m) => m.to_owned(),
        None if std::str::from_utf8(bytes).is_ok() => "text/plain".to_owned(),
        None => "application/octet-stream".to_owned(),
    }
}

/// Produces a file of a dynamic skill when it is read: given the file's path
/// inside the skill, its bytes, or `None` when there is no such file.
type Generator = Arc<dyn Fn(String) -> BoxFuture<Result<Option<Vec<u8>>, McpError>> + Send + Sync>;

/// A skill registered in code: its path and its files.
///
/// ```
/// # #[cfg(feature = "skills")] {
/// use genmcp::suite::{Skill, Skills};
/// let skills = Skills::new().directory_read(true);
/// skills.add(
///     Skill::new("git-workflow")
///         .file("SKILL.md", "---\nname: git-workflow\ndescription: Our Git conventions\n---\n# Git\n")
///         .file("references/branches.md", "Branch from main."),
/// ).unwrap();
/// assert_eq!(skills.len(), 1);
/// # }
/// ```
///
/// A skill whose files are produced when read, not known up front
/// ([`Skill::dynamic`]):
///
/// ```
/// # #[cfg(feature = "skills")] {
/// use genmcp::suite::{Skill, Skills};
/// let skills = Skills::new();
/// skills.add(
///     Skill::new("on-call")
///         .file("SKILL.md", "---\nname: on-call\ndescription: Who is on call\n---\nRead roster/today.md\n")
///         .dynamic(|path: String| async move {
///             Ok((path == "roster/today.md").then(|| b"Alice".to_vec()))
///         }),
/// ).unwrap();
/// # }
/// ```
#[derive(Clone)]
pub struct Skill {
    path: String,
    files: BTreeMap<String, Arc<[u8]>>,
    dynamic: Option<Generator>,
}

impl std::fmt::Debug for Skill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skill")
            .field("path", &self.path)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .field("dynamic", &self.dynamic.is_some())
            .finish()
    }
}

impl Skill {
    /// A skill at `path` (`/`-separated segments; the last is its `name`).
    pub fn new(path: impl Into<String>) -> Self {
        Skill {
            path: path.into(),
            files: BTreeMap::new(),
            dynamic: None,
        }
    }

    /// Adds (or replaces) a file at `path` inside the skill (`/`-separated);
    /// `SKILL.md` is required.
    pub fn file(mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.insert(path.into(), Arc::from(bytes.into()));
        self
    }

    /// Makes the skill dynamic: its entry says `"resources": "dynamic"` (no
    /// file is listed or digested up front), and a `resources/read` of one of
    /// its files that was not given with [`file`](Skill::file) calls
    /// `produce` with the file's path inside the skill (decoded, checked like
    /// every path: no `.`, `..` or empty segment). `produce` answers the bytes
    /// (served as text when UTF-8, else as a base64 blob, the MIME type by
    /// extension), `None` for no such file (`-32602` "Resource not found"), or
    /// an error, which the client gets. Bytes over [`MAX_BYTES_PER_SKILL`] are
    /// not served (an internal error). `SKILL.md` is still required as a file:
    /// its front matter is the entry's.
    pub fn dynamic<F, Fut>(mut self, produce: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<Vec<u8>>, McpError>> + Send + 'static,
    {
        self.dynamic = Some(Arc::new(move |path| Box::pin(produce(path))));
        self
    }
}

/// A checked skill of a snapshot: its front matter and, for a dynamic
/// skill, what produces its files.
pub(crate) struct SkillEntry {
    frontmatter: Map<String, Value>,
    dynamic: Option<Generator>,
}

/// What is served at one moment: skills by path, files by full path, and
/// the answers derived from them, built once per set at its first request
/// ([`Snapshot::derived`]).
#[derive(Default)]
pub(crate) struct Snapshot {
    skills: BTreeMap<String, SkillEntry>,
    files: BTreeMap<String, Arc<SkillFile>>,
    derived: std::sync::OnceLock<serve::Derived>,
}

impl Snapshot {
    /// The digests of every file, to tell whether two snapshots serve the same.
    fn fingerprint(&self) -> Vec<(&str, &str)> {
        self.files
            .iter()
            .map(|(p, f)| (p.as_str(), f.digest.as_str()))
            .collect()
    }

    /// The dynamic skills and their producers, by identity.
    fn producers(&self) -> Vec<(&str, *const ())> {
        self.skills
            .iter()
            .filter_map(|(p, s)| Some((p.as_str(), Arc::as_ptr(s.dynamic.as_ref()?).cast::<()>())))
            .collect()
    }

    /// The deepest skill holding `path` (a full file path) if it is dynamic:
    /// its path and producer.
    fn producer_of<'s>(&'s self, path: &str) -> Option<(&'s str, &'s Generator)> {
        let mut at = path;
        while let Some((parent, _)) = at.rsplit_once('/') {
            if let Some((key, skill)) = self.skills.get_key_value(parent) {
                return skill.dynamic.as_ref().map(|g| (key.as_str(), g));
            }
            at = parent;
        }
        None
    }
}

/// A checked skill: path, front matter and files (relative path, file).
struct Checked {
    path: String,
    frontmatter: Map<String, Value>,
    files: Vec<(String, Arc<SkillFile>)>,
    dynamic: Option<Generator>,
}

/// Checks a skill: its path and file paths, its `SKILL.md` front matter and
/// name, the extension's limits; digests every file (once).
fn check(skill: &Skill) -> Result<Checked, SkillError> {
    let path = skill.path.trim_matches('/').to_owned();
    if path.is_empty() || !path.split('/').all(uri::safe_segment) {
        return Err(SkillError::Path(skill.path.clone()));
    }
    for rel in skill.files.keys() {
        if !rel.split('/').all(uri::safe_segment) {
            return Err(SkillError::Path(format!("{path}/{rel}")));
        }
    }
    if skill.files.len() > MAX_FILES_PER_SKILL {
        return Err(SkillError::Limit(format!(
            "skill {path:?} has {} files, more than {MAX_FILES_PER_SKILL}",
            skill.files.len()
        )));
    }
    let total: u64 = skill.files.values().map(|b| b.len() as u64).sum();
    if total > MAX_BYTES_PER_SKILL {
        return Err(SkillError::Limit(format!(
            "skill {path:?} holds {total} bytes, more than {MAX_BYTES_PER_SKILL}"
        )));
    }
    let text = skill
        .files
        .get(SKILL_MD)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or_else(|| SkillError::NoSkillMd(path.clone()))?;
    let frontmatter = frontmatter::parse(text)?;
    let name = frontmatter
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    if !frontmatter::valid_name(name) {
        return Err(SkillError::Name {
            path,
            why: format!("name {name:?} breaks the naming rules (a-z, 0-9, -; 1-64)"),
        });
    }
    if name != last {
        return Err(SkillError::Name {
            path,
            why: format!("the last path segment is not the front matter name {name:?}"),
        });
    }
    let files = skill
        .files
        .iter()
        .map(|(rel, bytes)| (rel.clone(), Arc::new(SkillFile::new(rel, bytes.clone()))))
        .collect();
    Ok(Checked {
        path,
        frontmatter,
        files,
        dynamic: skill.dynamic.clone(),
    })
}

struct Inner {
    /// Skills registered in code, checked, by path.
    code: Mutex<BTreeMap<String, Arc<Checked>>>,
    /// The directory, when read from disk.
    disk: Option<disk::Disk>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// Held across a whole [`Skills::rebuild`] (from reading the sources to
    /// the swap, no `.await` inside): two rebuilds never interleave, so an
    /// older set can never replace a newer one.
    rebuilding: Mutex<()>,
    settings: RwLock<Settings>,
    catalog: Mutex<Option<WeakCatalog>>,
    on_change: Mutex<Vec<ChangeHook>>,
}

type ChangeHook = Arc<dyn Fn() + Send + Sync>;

#[derive(Clone, Copy)]
struct Settings {
    directory_read: bool,
    cache: Option<CacheHint>,
    max_total_bytes: u64,
}

/// The skills a suite serves (see the [module](self)). Cheap to clone; every
/// clone is the same catalog.
///
/// Changes (an [`add`](Skills::add), a [`remove`](Skills::remove), a
/// [`reload`](Skills::reload) that found the directory changed) are served at
/// once and told to listen streams as `notifications/resources/list_changed`
/// (and `notifications/resources/updated` for each changed file URI).
#[derive(Clone)]
pub struct Skills {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills")
            .field("skills", &self.len())
            .field("directory_read", &self.serves_directory_read())
            .finish()
    }
}

impl Default for Skills {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Skills {
    /// An empty catalog, to [`add`](Skills::add) skills to.
    pub fn new() -> Self {
        Self::with(None)
    }

    fn with(disk: Option<disk::Disk>) -> Self {
        Skills {
            inner: Arc::new(Inner {
                code: Mutex::new(BTreeMap::new()),
                disk,
                snapshot: RwLock::new(Arc::new(Snapshot::default())),
                rebuilding: Mutex::new(()),
                settings: RwLock::new(Settings {
                    directory_read: false,
                    cache: None,
                    max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
                }),
                catalog: Mutex::new(None),
                on_change: Mutex::new(Vec::new()),
            }),
        }
    }

    fn settings(&self) -> Settings {
        *self
            .inner
            .settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn set(self, f: impl FnOnce(&mut Settings)) -> Self {
        f(&mut self
            .inner
            .settings
            .write()
            .unwrap_or_else(|p| p.into_inner()));
        self
    }

    /// The skills under `root`: every directory holding a `SKILL.md` is a
    /// skill whose path is the directory's path below `root`, and every file
    /// below it (nested skills included) is one of its files. Hidden entries
    /// (a name starting with `.`) are skipped, and so is anything that
    /// resolves outside `root` (a symbolic link out of it), deeper than
    /// [`MAX_DEPTH`], or with a name that is not UTF-8; a skill that breaks the
    /// extension's rules or limits is skipped with a warning in the log.
    /// Fails when `root` cannot be read.
    pub fn from_dir(root: impl AsRef<Path>) -> Result<Self, SkillError> {
        let disk = disk::Disk::open(root.as_ref())?;
        let skills = Self::with(Some(disk));
        skills.reload()?;
        Ok(skills)
    }

    /// Serves `resources/directory/read` and declares `directoryRead: true`
    /// (default off). Set it before the suite is built.
    pub fn directory_read(self, on: bool) -> Self {
        self.set(|s| s.directory_read = on)
    }

    /// The cache hint of `skills/list`, `skills/get` and skill reads (default:
    /// the suite's list and read hints).
    pub fn cache(self, hint: CacheHint) -> Self {
        self.set(|s| s.cache = Some(hint))
    }

    /// The most bytes held in memory for all skills together (default
    /// [`DEFAULT_MAX_TOTAL_BYTES`]); skills past it are not served (warned in
    /// the log), in path order. A directory's files are read within it (a
    /// skill that does not fit is not kept in memory, a file that grew past
    /// what is left is read no further); while a reload reads the files that
    /// changed, the set served before is held too.
    pub fn max_total_bytes(self, bytes: u64) -> Self {
        let skills = self.set(|s| s.max_total_bytes = bytes);
        if let Err(e) = skills.reload() {
            tracing::warn!(error = %e, "skills: reload failed; serving the last set");
        }
        skills
    }

    /// Whether `resources/directory/read` is served.
    pub fn serves_directory_read(&self) -> bool {
        self.settings().directory_read
    }

    /// The capability value under `extensions["io.modelcontextprotocol/skills"]`.
    pub fn capability(&self) -> Value {
        let mut map = Map::new();
        if self.serves_directory_read() {
            map.insert("directoryRead".into(), Value::Bool(true));
        }
        Value::Object(map)
    }

    /// How many skills are served.
    pub fn len(&self) -> usize {
        self.snapshot().skills.len()
    }

    /// Whether no skill is served.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The URI of every skill's `SKILL.md`, in path order.
    pub fn uris(&self) -> Vec<String> {
        self.snapshot()
            .skills
            .keys()
            .map(|p| uri::to_uri(&format!("{p}/{SKILL_MD}")))
            .collect()
    }

    /// Adds (or replaces) a skill registered in code; refused (nothing
    /// changes) when it breaks the extension's rules or limits.
    pub fn add(&self, skill: Skill) -> Result<(), SkillError> {
        let checked = check(&skill)?;
        lock(&self.inner.code).insert(checked.path.clone(), Arc::new(checked));
        self.rebuild()?;
        Ok(())
    }

    /// Removes the skill registered in code at `path`; whether there was one.
    pub fn remove(&self, path: &str) -> bool {
        let removed = lock(&self.inner.code)
            .remove(path.trim_matches('/'))
            .is_some();
        if removed {
            let _ = self.rebuild();
        }
        removed
    }

    /// Reads the directory again if anything in it changed (a file added,
    /// removed, resized or modified; checked by walking it and reading each
    /// file's metadata, so an unchanged tree costs no file reads and no
    /// digests) and serves the new set. Returns whether what is served
    /// changed. A catalog without a directory only re-checks its limits.
    pub fn reload(&self) -> Result<bool, SkillError> {
        if let Some(disk) = &self.inner.disk {
            disk.refresh(self.settings().max_total_bytes)?;
        }
        self.rebuild()
    }

    /// Calls [`reload`](Skills::reload) every `interval` on a task of the
    /// current tokio runtime (the walk on a blocking thread), logging a
    /// failure and keeping the last good set; it ends when every clone of
    /// this catalog is dropped. Needs a tokio runtime (inside actix, one is).
    pub fn watch(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let skills = Skills { inner };
                match tokio::task::spawn_blocking(move || skills.reload()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "skills: reload failed; serving the last set")
                    }
                    Err(e) => tracing::warn!(error = %e, "skills: reload task failed"),
                }
            }
        })
    }

    /// The set served now.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.inner
            .snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn cache_hint(&self) -> Option<CacheHint> {
        self.settings().cache
    }

    /// Calls `hook` after every change of what is served (after the suite's
    /// catalog told its listen streams): for a subscription handler that does
    /// not feed on the catalog's events (the notes demo publishes a resource
    /// list change on its own bus with it).
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        lock(&self.inner.on_change).push(Arc::new(hook));
    }

    /// Tells listen streams of `catalog` about later changes.
    pub(crate) fn attach(&self, catalog: WeakCatalog) {
        *lock(&self.inner.catalog) = Some(catalog);
    }

    /// Builds the snapshot from the directory's skills and the code's (code
    /// wins on the same path), swaps it in if it differs and tells listeners.
    fn rebuild(&self) -> Result<bool, SkillError> {
        let rebuilding = lock(&self.inner.rebuilding);
        let mut all: BTreeMap<String, Arc<Checked>> = BTreeMap::new();
        if let Some(disk) = &self.inner.disk {
            for checked in disk.skills() {
                all.insert(checked.path.clone(), checked);
            }
        }
        for (path, checked) in lock(&self.inner.code).iter() {
            all.insert(path.clone(), checked.clone());
        }
        let mut next = Snapshot::default();
        let mut total = 0u64;
        let max_total = self.settings().max_total_bytes;
        for (path, checked) in all {
            let new_bytes: u64 = checked
                .files
                .iter()
                .filter(|(rel, _)| !next.files.contains_key(&format!("{path}/{rel}")))
                .map(|(_, f)| f.size())
                .sum();
            if total + new_bytes > max_total {
                tracing::warn!(skill = %path, limit = max_total,
                    "skills: over the total bytes limit; this skill is not served");
                continue;
            }
            total += new_bytes;
            for (rel, file) in &checked.files {
                next.files.insert(format!("{path}/{rel}"), file.clone());
            }
            next.skills.insert(
                path,
                SkillEntry {
                    frontmatter: checked.frontmatter.clone(),
                    dynamic: checked.dynamic.clone(),
                },
            );
        }
        let changed_uris: Vec<String>;
        {
            let mut current = self
                .inner
                .snapshot
                .write()
                .unwrap_or_else(|p| p.into_inner());
            if current.fingerprint() == next.fingerprint()
                && current.skills.keys().eq(next.skills.keys())
                && current.producers() == next.producers()
            {
                return Ok(false);
            }
            changed_uris = changed(&current, &next);
            *current = Arc::new(next);
        }
        // Listeners are told after the lock is released (a hook may add).
        drop(rebuilding);
        tracing::info!(
            changed = changed_uris.len(),
            "skills: the served set changed"
        );
        self.notify(&changed_uris);
        Ok(true)
    }

    fn notify(&self, changed_uris: &[String]) {
        let catalog = lock(&self.inner.catalog)
            .as_ref()
            .and_then(WeakCatalog::upgrade);
        if let Some(catalog) = catalog {
            catalog.resources_changed();
            for uri in changed_uris.iter().take(MAX_FILES_PER_SKILL) {
                catalog.resource_updated(uri.clone());
            }
        }
        let hooks: Vec<ChangeHook> = lock(&self.inner.on_change).clone();
        for hook in hooks {
            hook();
        }
    }
}

/// The URIs of files added, removed or changed between two snapshots.
fn changed(old: &Snapshot, new: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (path, file) in &new.files {
        if old.files.get(path).map(|f| &f.digest) != Some(&file.digest) {
            out.push(uri::to_uri(path));
        }
    }
    for path in old.files.keys() {
        if !new.files.contains_key(path) {
            out.push(uri::to_uri(path));
        }
    }
    out
}
