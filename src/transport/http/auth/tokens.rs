//! [`TokenTable`]: a static table of bearer tokens, for development and tests.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{AuthError, AuthFuture, Authenticator, Principal};

/// Bearer tokens and the principals they stand for, from lines
/// `TOKEN PRINCIPAL [admin]` (blank lines and `#` comments skipped). `admin`
/// grants the `admin` scope ([`Principal::is_admin`]); no other scopes are
/// granted. Tokens are looked up by their SHA-256, so a lookup's timing says
/// nothing about how much of a guess was right.
///
/// ```
/// use genmcp::http::auth::TokenTable;
/// let table = TokenTable::parse("# dev tokens\nt0ken-a ada admin\nt0ken-b bob\n")?;
/// assert_eq!(table.len(), 2);
/// assert!(TokenTable::parse("t0ken-c carol root").is_err());
/// # Ok::<(), genmcp::http::auth::AuthError>(())
/// ```
#[derive(Clone, Default)]
pub struct TokenTable {
    by_digest: HashMap<[u8; 32], Principal>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTable")
            .field("tokens", &self.by_digest.len())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenTable {
    /// Parses the table text; a malformed line or a repeated token is an
    /// error naming the line (never the token).
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let mut table = TokenTable::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let principal = match words.as_slice() {
                [_, name] => Principal::new(*name),
                [_, name, "admin"] => Principal::new(*name).with_scopes([Principal::ADMIN_SCOPE]),
                _ => {
                    return Err(AuthError::Config(format!(
                        "token table line {}: expected `TOKEN PRINCIPAL [admin]`",
                        n + 1
                    )));
                }
            };
            if table
                .by_digest
                .insert(digest(words[0]), principal)
                .is_some()
            {
                return Err(AuthError::Config(format!(
                    "token table line {}: the token is listed twice",
                    n + 1
                )));
            }
        }
        Ok(table)
    }

    /// Reads and parses the table at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| AuthError::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text)
    }

    /// With `token` standing for `principal`.
    pub fn with(mut self, token: &str, principal: Principal) -> Self {
        self.by_digest.insert(digest(token), principal);
        self
    }

    /// How many tokens.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The principal of `token`, if listed.
    pub fn lookup(&self, token: &str) -> Option<&Principal> {
        self.by_digest.get(&digest(token))
    }
}

impl Authenticator for TokenTable {
    fn authenticate(&self, token: &str) -> AuthFuture {
        let found = self
            .lookup(token)
            .cloned()
            .ok_or_else(|| AuthError::invalid("unknown token"));
        Box::pin(async move { found })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_a_principal_and_maybe_admin() {
        let t = TokenTable::parse("\n# c\n  a  ada admin \nb bob\n").unwrap();
        assert!(t.lookup("a").unwrap().is_admin());
        assert_eq!(t.lookup("b").unwrap().subject(), "bob");
        assert!(!t.lookup("b").unwrap().is_admin());
        assert!(t.lookup("c").is_none());
        for bad in ["x", "x y admin z", "x y root", "a b\na c"] {
            let err = TokenTable::parse(bad).unwrap_err().to_string();
            assert!(err.contains("line"), "{bad:?}: {err}");
        }
    }
}
