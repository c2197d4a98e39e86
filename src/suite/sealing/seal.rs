//! Integrity-protected opaque tokens: pagination cursors and MRTR `requestState`.
//!
//! A token is `kid "." base64url(payload JSON) "." base64url(HMAC-SHA256(key,
//! purpose || 0 || kid || 0 || payload))`, sealed with the current key of the
//! [`KeySet`] and naming it by its id (`kid`), so opening is one MAC check with
//! the key it names (a token naming a key the set does not hold is refused at
//! once). The MAC covers the key id and the exact payload bytes and is checked
//! in constant time, so a token with anything appended, removed or changed is
//! refused. Tokens of the earlier form (`base64url(payload) "." tag`, no key
//! id, sealed before key sets) still open with any key of the set. Tokens are
//! signed, not encrypted: do not put secrets in a tool's state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use data_encoding::BASE64URL_NOPAD as URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::keys::KeySet;

type HmacSha256 = Hmac<Sha256>;

/// Longest token accepted from a client (longer is refused without decoding).
pub(crate) const MAX_TOKEN_LEN: usize = 256 * 1024;

/// Token purposes (domain separation: a cursor never verifies as a request state).
pub(crate) mod purpose {
    /// Pagination cursors.
    pub const CURSOR: &str = "genmcp/cursor/v1";
    /// MRTR `requestState`.
    pub const REQUEST_STATE: &str = "genmcp/request-state/v1";
    /// 2025-era `Mcp-Session-Id` (the HTTP transport's compatibility path).
    pub const SESSION: &str = "genmcp/session/v1";
}

/// The live key set of a suite, replaceable while it serves (what `genmcp
/// serve` does on `SIGHUP`): tokens sealed from then on use the new current
/// key, and tokens naming any key of the new set open. Cheap to clone; every
/// clone is the same set.
#[derive(Clone)]
pub struct SealingKeys {
    keys: Arc<RwLock<Arc<KeySet>>>,
}

impl std::fmt::Debug for SealingKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealingKeys")
            .field("ids", &self.get().ids())
            .finish()
    }
}

impl SealingKeys {
    /// A live set starting with `keys`.
    pub fn new(keys: KeySet) -> Self {
        SealingKeys {
            keys: Arc::new(RwLock::new(Arc::new(keys))),
        }
    }

    /// The set in use now.
    pub fn get(&self) -> Arc<KeySet> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the set; returns the one it replaced.
    pub fn replace(&self, keys: KeySet) -> Arc<KeySet> {
        std::mem::replace(
            &mut *self.keys.write().unwrap_or_else(|p| p.into_inner()),
            Arc::new(keys),
        )
    }
}

/// Seals and opens tokens with a key set. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Sealer {
    keys: SealingKeys,
    /// Only used when the OS random source fails: fed through the keyed MAC, so
    /// the nonces stay unpredictable and say nothing about the server's traffic.
    fallback: Arc<AtomicU64>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { keys: <redacted> }")
    }
}

fn mac(key: &[u8; 32], parts: &[&[u8]]) -> Option<HmacSha256> {
    let mut mac = HmacSha256::new_from_slice(key.as_slice()).ok()?;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            mac.update(&[0]);
        }
        mac.update(part);
    }
    Some(mac)
}

impl Sealer {
    /// A sealer with this key (share it between replicas that must accept each
    /// other's cursors and request states).
    #[cfg(test)]
    pub(crate) fn new(key: [u8; 32]) -> Self {
        Self::with_keys(SealingKeys::new(KeySet::new(key)))
    }

    /// A sealer with this live key set.
    pub(crate) fn with_keys(keys: SealingKeys) -> Self {
        Sealer {
            keys,
            fallback: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The live key set.
    pub(crate) fn keys(&self) -> &SealingKeys {
        &self.keys
    }

    /// A fresh random key from the operating system.
    ///
    /// # Panics
    ///
    /// If the operating system's random source fails: a guessable key would let
    /// clients forge cursors and request states. Set a key with
    /// `SuiteBuilder::secret` to avoid the random source altogether.
    pub(crate) fn random_key() -> [u8; 32] {
        let mut key = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut key) {
            panic!(
                "the operating system's random source failed ({e}); set a key with SuiteBuilder::secret"
            );
        }
        key
    }

    /// A sealer with a fresh random key ([`Sealer::random_key`]).
    #[cfg(test)]
    pub(crate) fn random() -> Self {
        Self::new(Self::random_key())
    }

    /// A random 64-bit nonce (so two states sealed for the same request in the
    /// same millisecond still differ). Unlike a counter, it tells a client nothing
    /// about how many tokens the server sealed for others.
    pub(crate) fn nonce(&self) -> u64 {
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            // A keyed PRF of a private counter: as unpredictable to clients.
            let n = self.fallback.fetch_add(1, Ordering::Relaxed);
            let keys = self.keys.get();
            if let Some(mac) = mac(keys.current().1, &[b"genmcp/nonce/v1", &n.to_le_bytes()]) {
                let tag = mac.finalize().into_bytes();
                bytes.copy_from_slice(&tag[..8]);
            }
        }
        u64::from_le_bytes(bytes)
    }

    /// Seals `payload` for `purpose` with the current key.
    pub(crate) fn seal(&self, purpose: &str, payload: &Value) -> String {
        let body = serde_json::to_vec(payload).unwrap_or_default();
        let keys = self.keys.get();
        let (kid, key) = keys.current();
        let tag = mac(key, &[purpose.as_bytes(), kid.as_bytes(), &body])
            .map(|m| m.finalize().into_bytes().to_vec())
            .unwrap_or_default();
        format!(
            "{kid}.{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(&tag)
        )
    }

    /// Opens a token sealed for `purpose`: `None` unless it is well formed, names
    /// a key of the set, and its MAC verifies over the exact key id and payload.
    pub(crate) fn open(&self, purpose: &str, token: &str) -> Option<Value> {
        if token.len() > MAX_TOKEN_LEN {
            return None;
        }
        let keys = self.keys.get();
        let mut parts = token.split('.');
        let (first, second, third) = (parts.next()?, parts.next()?, parts.next());
        if parts.next().is_some() {
            return None;
        }
        let body = match third {
            Some(tag) => {
                let key = keys.get(first)?;
                let body = URL_SAFE_NO_PAD.decode(second.as_bytes()).ok()?;
                let tag = URL_SAFE_NO_PAD.decode(tag.as_bytes()).ok()?;
                mac(key, &[purpose.as_bytes(), first.as_bytes(), &body])?
                    .verify_slice(&tag)
                    .ok()?;
                body
            }
            // The earlier form, without a key id: any key of the set.
            None => {
                let body = URL_SAFE_NO_PAD.decode(first.as_bytes()).ok()?;
                let tag = URL_SAFE_NO_PAD.decode(second.as_bytes()).ok()?;
                keys.all().find(|key| {
                    mac(key, &[purpose.as_bytes(), &body])
                        .is_some_and(|m| m.verify_slice(&tag).is_ok())
                })?;
                body
            }
        };
        serde_json::from_slice(&body).ok()
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The expiry (ms since the epoch) of a token issued now with lifetime `ttl`.
pub(crate) fn expiry(ttl: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

/// Whether an expiry read from a token has passed.
pub(crate) fn expired(exp: u64) -> bool {
    now_ms() >= exp
}

/// Hex SHA-256 of the canonical JSON of `value` (object keys sorted, compact):
/// equal JSON values give equal digests whatever their key order.
pub(crate) fn digest(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    let hash = Sha256::digest(text.as_bytes());
    // Hex without a `format!` per byte: this runs on every tools/call.
    data_encoding::HEXLOWER.encode(&hash)
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    canonical(v, out);
                }
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sealed_tokens_open_only_unchanged_and_for_their_purpose() {
        let s = Sealer::new([7; 32]);
        let payload = json!({"o": 10, "k": "tools"});
        let token = s.seal(purpose::CURSOR, &payload);
        assert_eq!(s.open(purpose::CURSOR, &token), Some(payload));
        assert_eq!(s.open(purpose::REQUEST_STATE, &token), None);
        assert_eq!(s.open(purpose::CURSOR, &format!("{token}-TAMPERED")), None);
        assert_eq!(s.open(purpose::CURSOR, &format!("{token}A")), None);
        assert_eq!(s.open(purpose::CURSOR, &token[1..]), None);
        assert_eq!(s.open(purpose::CURSOR, "garbage"), None);
        assert_eq!(s.open(purpose::CURSOR, ""), None);
        assert_eq!(s.open(purpose::CURSOR, "."), None);
        // Another key does not verify.
        assert_eq!(Sealer::new([8; 32]).open(purpose::CURSOR, &token), None);
        // A forged payload with the original tag does not verify.
        let (kid, rest) = token.split_once('.').unwrap();
        let (_, tag) = rest.split_once('.').unwrap();
        let forged = format!(
            "{kid}.{}.{tag}",
            URL_SAFE_NO_PAD.encode(br#"{"o":0,"k":"tools"}"#)
        );
        assert_eq!(s.open(purpose::CURSOR, &forged), None);
        // Nor does the token under another key id of the set.
        let two = Sealer::with_keys(SealingKeys::new(
            KeySet::new([7; 32]).with_key([9; 32]).unwrap(),
        ));
        let other = super::super::keys::key_id(&[9; 32]);
        assert_eq!(
            two.open(purpose::CURSOR, &token.replacen(kid, &other, 1)),
            None
        );
        assert_eq!(
            two.open(purpose::CURSOR, &token),
            Some(json!({"o": 10, "k": "tools"}))
        );
    }

    /// The opener under random and mutated tokens (seeded, bounded; more cases
    /// with `PROPTEST_CASES`): no panic, and nothing opens unless unchanged.
    #[test]
    fn fuzz_the_sealed_token_opener() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        let config = Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(
            config,
            TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5e; 32]),
        );
        let s = Sealer::new([3; 32]);
        let good = s.seal(purpose::CURSOR, &json!({"o": 10, "k": "tools"}));
        let token = prop_oneof![
            ".{0,80}",
            "[A-Za-z0-9_.-]{0,120}",
            prop::collection::vec((any::<usize>(), any::<char>()), 1..4).prop_map({
                let good = good.clone();
                move |edits| {
                    let mut chars: Vec<char> = good.chars().collect();
                    for (at, c) in edits {
                        let i = at % chars.len();
                        chars[i] = c;
                    }
                    chars.into_iter().collect::<String>()
                }
            }),
        ];
        runner
            .run(&token, |t| {
                let opened = s.open(purpose::CURSOR, &t);
                prop_assert!(opened.is_none() || t == good, "{t:?} opened");
                Ok(())
            })
            .unwrap();
        assert!(
            s.open(purpose::CURSOR, &"a".repeat(MAX_TOKEN_LEN + 1))
                .is_none()
        );
    }

    #[test]
    fn nonces_are_not_a_counter() {
        let s = Sealer::new([1; 32]);
        let a: Vec<u64> = (0..64).map(|_| s.nonce()).collect();
        let distinct: std::collections::HashSet<u64> = a.iter().copied().collect();
        assert_eq!(distinct.len(), a.len());
        assert!(
            a.windows(2)
                .filter(|w| w[1] == w[0].wrapping_add(1))
                .count()
                < 2,
            "nonces must not count up: {a:?}"
        );
    }

    #[test]
    fn any_key_of_the_set_opens_what_names_it_and_the_current_seals() {
        let payload = json!({"o": 1});
        let old = Sealer::new([1; 32]);
        let old_token = old.seal(purpose::CURSOR, &payload);
        // Legacy tokens (no key id) still open with any key of the set.
        let body = URL_SAFE_NO_PAD.encode(&serde_json::to_vec(&payload).unwrap());
        let legacy_tag = mac(
            &[1; 32],
            &[
                purpose::CURSOR.as_bytes(),
                &URL_SAFE_NO_PAD.decode(body.as_bytes()).unwrap(),
            ],
        )
        .unwrap()
        .finalize()
        .into_bytes();
        let legacy = format!("{body}.{}", URL_SAFE_NO_PAD.encode(&legacy_tag));
        let rotated = Sealer::with_keys(SealingKeys::new(
            KeySet::new([2; 32]).with_key([1; 32]).unwrap(),
        ));
        assert_eq!(
            rotated.open(purpose::CURSOR, &old_token),
            Some(payload.clone())
        );
        assert_eq!(
            rotated.open(purpose::CURSOR, &legacy),
            Some(payload.clone())
        );
        let new_token = rotated.seal(purpose::CURSOR, &payload);
        assert!(new_token.starts_with(&super::super::keys::key_id(&[2; 32])));
        assert_eq!(
            old.open(purpose::CURSOR, &new_token),
            None,
            "the old set lacks the new key"
        );
        // Replaced while serving: the old key dropped, its tokens refused.
        rotated.keys().replace(KeySet::new([2; 32]));
        assert_eq!(rotated.open(purpose::CURSOR, &old_token), None);
        assert_eq!(rotated.open(purpose::CURSOR, &new_token), Some(payload));
    }

    #[test]
    fn random_keys_differ() {
        let a = Sealer::random().seal(purpose::CURSOR, &json!(1));
        let b = Sealer::random().seal(purpose::CURSOR, &json!(1));
        assert_ne!(a, b);
    }

    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let a = json!({"b": 1, "a": {"y": [1, "x"], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, "x"]}, "b": 1});
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(
            digest(&a),
            digest(&json!({"b": 2, "a": {"y": [1, "x"], "x": null}}))
        );
        assert_ne!(digest(&json!({"a": "1"})), digest(&json!({"a": 1})));
        assert_eq!(digest(&json!({})).len(), 64);
    }

    #[test]
    fn digest_is_the_lower_case_hex_sha256_of_the_canonical_text() {
        // States sealed by one node are checked by the others: the digest's
        // text must not change between versions. `sha256sum` of `{}`:
        assert_eq!(
            digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn expiry_is_in_the_future_and_zero_ttl_is_expired() {
        assert!(!expired(expiry(Duration::from_secs(60))));
        assert!(expired(expiry(Duration::ZERO)));
    }
}
