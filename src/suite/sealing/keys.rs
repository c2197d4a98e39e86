//! A set of sealing keys, one current: tokens are sealed with the current key
//! and name it by its id; any key of the set opens the tokens that name it.
//! Rotating keys without losing an in-flight `requestState` or cursor is then
//! a matter of adding the new key first, making it current, and dropping the
//! old one once its tokens have expired (`docs/auth.md`, "Rotating the
//! sealing key").
//!
//! **Key file format** (`genmcp serve --key-file`): one key per line, each
//! 64 hexadecimal digits (as `openssl rand -hex 32` prints), the **current key
//! first**; blank lines and lines starting with `#` are ignored.
//!
//! ```
//! use genmcp::suite::KeySet;
//! let text = format!("# current\n{}\n{}\n", "ab".repeat(32), "cd".repeat(32));
//! let keys = KeySet::parse(&text).unwrap();
//! assert_eq!(keys.len(), 2);
//! assert_eq!(keys.current_id(), KeySet::new([0xab; 32]).current_id());
//! ```

use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::secret::{SecretError, parse_secret};

/// Most keys a set holds (a token naming none of them is refused at once).
pub const MAX_KEYS: usize = 16;

/// Largest key file [`KeySet::load_file`] reads (64 KiB: room for
/// [`MAX_KEYS`] keys and plenty of comments).
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;

/// The public id of a key: `k` and 12 hex digits of a SHA-256 of it (domain
/// separated; it reveals nothing usable about the key). Tokens carry it.
pub fn key_id(key: &[u8; 32]) -> String {
    let mut h = Sha256::new();
    h.update(b"genmcp/key-id/v1\0");
    h.update(key);
    let hex = data_encoding::HEXLOWER.encode(&h.finalize());
    format!("k{}", &hex[..12])
}

/// Sealing keys: the current one (seals) and older or newer ones (open only).
///
/// A key file (`genmcp serve --key-file`) holds one key per line, each 64
/// hexadecimal digits (as `openssl rand -hex 32` prints), the current key
/// first; blank lines and lines starting with `#` are ignored; at most
/// [`MAX_KEYS`].
///
/// ```
/// use genmcp::suite::KeySet;
/// let text = format!("# current\n{}\n{}\n", "ab".repeat(32), "cd".repeat(32));
/// let keys = KeySet::parse(&text).unwrap();
/// assert_eq!(keys.len(), 2);
/// assert_eq!(keys.current_id(), KeySet::new([0xab; 32]).current_id());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct KeySet {
    /// `(id, key)`, the current first.
    keys: Vec<(String, [u8; 32])>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet").field("ids", &self.ids()).finish()
    }
}

/// Why a key set cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeySetError {
    /// A key could not be read or is not 64 hex digits.
    #[error("{0}")]
    Key(#[from] SecretError),
    /// No key at all.
    #[error("{0}: no key (one key per line, 64 hex digits, the current first)")]
    Empty(String),
    /// More than [`MAX_KEYS`].
    #[error("{0}: more than {MAX_KEYS} keys")]
    TooMany(String),
    /// A key file larger than [`MAX_KEY_FILE_BYTES`].
    #[error("{0}: larger than {MAX_KEY_FILE_BYTES} bytes")]
    TooLarge(String),
    /// The same key twice (or two keys with one id).
    #[error("{0}: the same key is listed twice")]
    Duplicate(String),
}

impl KeySet {
    /// A set of one key, current.
    pub fn new(current: [u8; 32]) -> Self {
        KeySet {
            keys: vec![(key_id(&current), current)],
        }
    }

    /// Adds `key` as one that opens tokens but does not seal (an older key
    /// being retired, or a newer one being introduced). A key already in the
    /// set is not added twice. Fails with [`KeySetError::TooMany`] when the
    /// set already holds [`MAX_KEYS`] keys.
    pub fn with_key(mut self, key: [u8; 32]) -> Result<Self, KeySetError> {
        let id = key_id(&key);
        if self.keys.iter().any(|(i, _)| *i == id) {
            return Ok(self);
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(KeySetError::TooMany("key set".to_owned()));
        }
        self.keys.push((id, key));
        Ok(self)
    }

    /// Parses a key file's text (the format is above).
    pub fn parse(text: &str) -> Result<Self, KeySetError> {
        Self::parse_from(text, "key file")
    }

    fn parse_from(text: &str, origin: &str) -> Result<Self, KeySetError> {
        let mut keys: Vec<(String, [u8; 32])> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key = parse_secret(line).map_err(|e| match e {
                SecretError::Format { found, .. } => SecretError::Format {
                    origin: format!("{origin}, line {}", n + 1),
                    found,
                },
                other => other,
            })?;
            let id = key_id(&key);
            if keys.iter().any(|(i, _)| *i == id) {
                return Err(KeySetError::Duplicate(origin.to_owned()));
            }
            if keys.len() == MAX_KEYS {
                return Err(KeySetError::TooMany(origin.to_owned()));
            }
            keys.push((id, key));
        }
        if keys.is_empty() {
            return Err(KeySetError::Empty(origin.to_owned()));
        }
        Ok(KeySet { keys })
    }

    /// Reads and parses a key file; one larger than [`MAX_KEY_FILE_BYTES`]
    /// is refused ([`KeySetError::TooLarge`]) without being read whole.
    pub fn load_file(path: &Path) -> Result<Self, KeySetError> {
        use std::io::Read as _;
        let read = |source| SecretError::Read {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read)?;
        let mut text = Vec::new();
        let cap = u64::try_from(MAX_KEY_FILE_BYTES).unwrap_or(u64::MAX);
        file.take(cap.saturating_add(1))
            .read_to_end(&mut text)
            .map_err(read)?;
        if text.len() > MAX_KEY_FILE_BYTES {
            return Err(KeySetError::TooLarge(path.display().to_string()));
        }
        Self::parse_from(&String::from_utf8_lossy(&text), &path.display().to_string())
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Always false: a set has its current key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.keys[0].0
    }

    /// Every key's id, the current first.
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|(i, _)| i.clone()).collect()
    }

    /// Whether a key with this id is in the set.
    pub fn contains(&self, id: &str) -> bool {
        self.keys.iter().any(|(i, _)| i == id)
    }

    /// The current key's bytes (what seals; the bus's authentication keys
    /// derive from the set, see `KeySet::bus_keys` with the `redis`
    /// feature).
    pub fn current_key(&self) -> [u8; 32] {
        self.keys[0].1
    }

    /// The current key.
    pub(crate) fn current(&self) -> (&str, &[u8; 32]) {
        let (id, key) = &self.keys[0];
        (id, key)
    }

    /// The key with this id.
    pub(crate) fn get(&self, id: &str) -> Option<&[u8; 32]> {
        self.keys.iter().find(|(i, _)| i == id).map(|(_, k)| k)
    }

    /// Every key, the current first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &[u8; 32]> {
        self.keys.iter().map(|(_, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_lists_the_current_key_first() {
        let a = "11".repeat(32);
        let b = "22".repeat(32);
        let set = KeySet::parse(&format!("\n# rotation of 2026-12\n{b}\n  {a}  \n\n")).unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.current_id(), key_id(&[0x22; 32]));
        assert!(set.contains(&key_id(&[0x11; 32])));
        assert!(set.current_id().starts_with('k') && set.current_id().len() == 13);
        for bad in [
            String::new(),
            "# only a comment\n".to_owned(),
            format!("{a}\n{a}\n"),
            format!("{a}\nnot a key\n"),
            (0..=MAX_KEYS)
                .map(|i| format!("{i:064x}\n"))
                .collect::<String>(),
        ] {
            let e = KeySet::parse(&bad).expect_err("refused");
            assert!(!e.to_string().contains(&a[..20]), "no key quoted: {e}");
        }
    }

    #[test]
    fn a_set_never_grows_past_its_bound() {
        let mut set = KeySet::new([0; 32]);
        for i in 1..MAX_KEYS {
            set = set.with_key([u8::try_from(i).unwrap(); 32]).unwrap();
        }
        assert_eq!(set.len(), MAX_KEYS);
        let again = set.clone().with_key([1; 32]).expect("a key already held");
        assert_eq!(again.len(), MAX_KEYS);
        assert!(matches!(
            set.with_key([0xff; 32]),
            Err(KeySetError::TooMany(_))
        ));
    }

    #[test]
    fn a_key_file_larger_than_its_bound_is_refused() {
        let dir = std::env::temp_dir().join(format!("genmcp-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys");
        let key = "ab".repeat(32);
        let mut text = format!("{key}\n");
        text.push_str(&"#".repeat(MAX_KEY_FILE_BYTES));
        std::fs::write(&path, &text).unwrap();
        assert!(matches!(
            KeySet::load_file(&path),
            Err(KeySetError::TooLarge(_))
        ));
        text.truncate(MAX_KEY_FILE_BYTES);
        std::fs::write(&path, &text).unwrap();
        assert_eq!(KeySet::load_file(&path).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
