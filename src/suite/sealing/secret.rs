//! The sealing key from configuration: the secret that signs `requestState`s
//! and cursors ([`crate::suite::SuiteBuilder::secret`]). Nodes that share it
//! accept each other's tokens; without it each process makes a random key and
//! tokens only come back to the node that sealed them.
//!
//! **Accepted format**: exactly 64 hexadecimal digits (`0-9`, `a-f`, `A-F`:
//! 32 bytes), optionally surrounded by ASCII whitespace (a trailing newline,
//! for example). This is what `openssl rand -hex 32` prints. Anything else is
//! refused with [`SecretError`], whose message never quotes the text.
//!
//! ```
//! use genmcp::suite::secret::parse_secret;
//! let key = parse_secret(&"ab".repeat(32)).unwrap();
//! assert_eq!(key, [0xab; 32]);
//! assert!(parse_secret("too short").is_err());
//! ```

use std::path::{Path, PathBuf};

/// The environment variable `genmcp serve` reads the key from when no
/// `--key-file` is given: the same 64 hex digits as a key file holds.
pub const KEY_ENV: &str = "GENMCP_KEY";

/// Why a configured key cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The key file could not be read.
    #[error("cannot read the key file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The text is not 64 hexadecimal digits.
    #[error(
        "{origin}: the key must be exactly 64 hexadecimal digits (32 bytes, as \
         `openssl rand -hex 32` prints), optionally surrounded by whitespace; \
         found {found}"
    )]
    Format {
        /// Where the text came from (a path, or the variable's name).
        origin: String,
        /// What was found instead, without quoting it.
        found: String,
    },
}

/// Parses a key: 64 hex digits, surrounding ASCII whitespace ignored.
pub fn parse_secret(text: &str) -> Result<[u8; 32], SecretError> {
    parse_from(text, "key")
}

fn parse_from(text: &str, origin: &str) -> Result<[u8; 32], SecretError> {
    let digits = text.trim_ascii().as_bytes();
    let error = |found: String| SecretError::Format {
        origin: origin.to_owned(),
        found,
    };
    if digits.len() != 64 {
        return Err(error(format!("{} characters", digits.len())));
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let hex = |c: u8| (c as char).to_digit(16);
        match (hex(pair[0]), hex(pair[1])) {
            (Some(hi), Some(lo)) => *byte = (hi * 16 + lo) as u8,
            _ => return Err(error("a character that is not a hexadecimal digit".into())),
        }
    }
    Ok(key)
}

/// Reads and parses a key file (see the [module docs](self) for the format).
pub fn load_secret_file(path: &Path) -> Result<[u8; 32], SecretError> {
    let text = std::fs::read(path).map_err(|source| SecretError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&text);
    parse_from(&text, &path.display().to_string())
}

/// The key in the environment variable `var`, if it is set (and not empty).
pub fn secret_from_env(var: &str) -> Option<Result<[u8; 32], SecretError>> {
    match std::env::var(var) {
        Ok(text) if !text.trim().is_empty() => Some(parse_from(&text, var)),
        Ok(_) => None,
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => Some(Err(SecretError::Format {
            origin: var.to_owned(),
            found: "text that is not UTF-8".into(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_output_is_accepted_and_everything_else_refused() {
        let hex = "00112233445566778899aabbccddeeffFFEEDDCCBBAA99887766554433221100";
        let key = parse_secret(&format!("{hex}\n")).expect("openssl's line");
        assert_eq!(key[0], 0x00);
        assert_eq!(key[1], 0x11);
        assert_eq!(key[16], 0xff);
        assert_eq!(key[31], 0x00);
        for bad in ["", &hex[..62], &format!("{hex}00"), &hex.replace('a', "g")] {
            let e = parse_secret(bad).expect_err("refused");
            assert!(
                !e.to_string().contains("445566"),
                "the key is not quoted: {e}"
            );
        }
        // Multi-byte text of 64 bytes is refused, not sliced.
        assert!(parse_secret(&"é".repeat(32)).is_err());
    }

    #[test]
    fn a_missing_file_names_the_path() {
        let e = load_secret_file(Path::new("/nonexistent/genmcp.key")).expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/genmcp.key"));
    }
}
