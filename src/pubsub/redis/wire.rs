//! The bus's wire format, version 1: what one node `PUBLISH`es on the channel
//! `<prefix><topic>` and the others check before delivering.
//!
//! ```text
//! offset  size  field
//! 0       1     b'G'
//! 1       1     version (1)
//! 2       8     node id (big-endian), random per bus
//! 10      8     sequence number (big-endian), per node, from 1, +1 per publish
//! 18      8     the publisher's clock, milliseconds since the Unix epoch (big-endian)
//! 26      32    tag: HMAC-SHA256 under the bus key, or 32 zero bytes without a key
//! 58      ..    the publish: a JSON array of messages
//! ```
//!
//! The tag covers bytes 0..26, the channel name (its length as 4 big-endian
//! bytes, then its bytes) and the JSON, so a message cannot be moved to
//! another topic or prefix. The bus key is derived from the shared sealing key
//! ([`BusKey::derive`]: `HMAC-SHA256(key, "genmcp bus v1")`), so a sealing key
//! and a bus key are never the same bytes.
//!
//! [`decode`] never panics and never allocates: it borrows from its input
//! (fuzzed in `tests/fuzz_bus.rs`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The first byte of every frame.
pub const MAGIC: u8 = b'G';
/// The version this build writes and reads.
pub const VERSION: u8 = 1;
/// The header's length: everything before the JSON.
pub const HEADER_LEN: usize = 58;
/// Where the tag starts (the authenticated header is `0..TAG_AT`).
const TAG_AT: usize = 26;

/// The key that authenticates bus messages, derived from the nodes' shared
/// sealing key. `{:?}` never shows it.
#[derive(Clone)]
pub struct BusKey([u8; 32]);

impl std::fmt::Debug for BusKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BusKey(***)")
    }
}

impl BusKey {
    /// The bus key of the sealing key `secret`: `HMAC-SHA256(secret, "genmcp
    /// bus v1")` (domain-separated from the sealing uses of the same key).
    pub fn derive(secret: &[u8; 32]) -> Self {
        let mut mac = mac_with(secret);
        mac.update(b"genmcp bus v1");
        BusKey(mac.finalize().into_bytes().into())
    }

    /// The tag of a frame whose authenticated header is `head`, published on
    /// `channel` with `body`.
    fn tag(&self, head: &[u8], channel: &[u8], body: &[u8]) -> HmacSha256 {
        let mut mac = mac_with(&self.0);
        mac.update(head);
        let len = u32::try_from(channel.len()).unwrap_or(u32::MAX);
        mac.update(&len.to_be_bytes());
        mac.update(channel);
        mac.update(body);
        mac
    }
}

/// HMAC-SHA256 keyed with `key`. HMAC pads a key shorter than the block (64
/// bytes) with zeros; doing it here makes the construction infallible.
fn mac_with(key: &[u8; 32]) -> HmacSha256 {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    <HmacSha256 as Mac>::new(hmac::digest::generic_array::GenericArray::from_slice(
        &block,
    ))
}

/// The header fields of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The publishing bus's node id.
    pub node: u64,
    /// Its sequence number: each publish of a node has a larger one.
    pub seq: u64,
    /// The publisher's clock at the publish, in ms since the Unix epoch.
    pub sent_ms: u64,
}

/// Why a frame was refused by [`decode`] or [`Frame::verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// Too short, another magic byte, or a version this build does not read.
    Malformed,
    /// The tag is not the bus key's.
    Forged,
}

/// A decoded frame borrowing its input.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The header.
    pub header: Header,
    head: &'a [u8],
    tag: &'a [u8],
    /// The publish: a JSON array of messages (not parsed here).
    pub body: &'a [u8],
}

/// Splits `bytes` into header, tag and body. Checks the magic and version
/// only: call [`Frame::verify`] before trusting anything.
pub fn decode(bytes: &[u8]) -> Result<Frame<'_>, Refused> {
    let Some((head, rest)) = bytes.split_at_checked(TAG_AT) else {
        return Err(Refused::Malformed);
    };
    let Some((tag, body)) = rest.split_at_checked(HEADER_LEN - TAG_AT) else {
        return Err(Refused::Malformed);
    };
    if head[0] != MAGIC || head[1] != VERSION {
        return Err(Refused::Malformed);
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&head[at..at + 8]);
        u64::from_be_bytes(w)
    };
    Ok(Frame {
        header: Header {
            node: word(2),
            seq: word(10),
            sent_ms: word(18),
        },
        head,
        tag,
        body,
    })
}

impl Frame<'_> {
    /// Whether the tag is `key`'s for this frame on `channel` (in constant
    /// time); always true without a key (nothing to check).
    pub fn verify(&self, key: Option<&BusKey>, channel: &[u8]) -> Result<(), Refused> {
        match key {
            None => Ok(()),
            Some(key) => key
                .tag(self.head, channel, self.body)
                .verify_slice(self.tag)
                .map_err(|_| Refused::Forged),
        }
    }
}

/// A frame buffer with room for the header, the body to be appended after it.
pub fn buffer(capacity: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEADER_LEN + capacity);
    buf.resize(HEADER_LEN, 0);
    buf
}

/// Writes the header of `frame` (made by [`buffer`], its body appended) in
/// place, with the tag of `key` for `channel` (zeros without a key).
pub fn seal(frame: &mut [u8], header: Header, key: Option<&BusKey>, channel: &[u8]) {
    if frame.len() < HEADER_LEN {
        return;
    }
    frame[0] = MAGIC;
    frame[1] = VERSION;
    frame[2..10].copy_from_slice(&header.node.to_be_bytes());
    frame[10..18].copy_from_slice(&header.seq.to_be_bytes());
    frame[18..26].copy_from_slice(&header.sent_ms.to_be_bytes());
    let (head, rest) = frame.split_at_mut(TAG_AT);
    let (tag, body) = rest.split_at_mut(HEADER_LEN - TAG_AT);
    match key {
        Some(key) => tag.copy_from_slice(&key.tag(head, channel, body).finalize().into_bytes()),
        None => tag.fill(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(key: Option<&BusKey>, channel: &[u8], body: &[u8]) -> Vec<u8> {
        let mut f = buffer(body.len());
        f.extend_from_slice(body);
        let header = Header {
            node: 7,
            seq: 3,
            sent_ms: 1_000,
        };
        seal(&mut f, header, key, channel);
        f
    }

    #[test]
    fn a_sealed_frame_verifies_only_under_its_key_channel_and_bytes() {
        let key = BusKey::derive(&[1; 32]);
        let f = framed(Some(&key), b"genmcp:tools", b"[1]");
        let frame = decode(&f).expect("decodes");
        assert_eq!(frame.header.node, 7);
        assert_eq!(frame.header.seq, 3);
        assert_eq!(frame.body, b"[1]");
        assert_eq!(frame.verify(Some(&key), b"genmcp:tools"), Ok(()));
        let other = BusKey::derive(&[2; 32]);
        assert_eq!(
            frame.verify(Some(&other), b"genmcp:tools"),
            Err(Refused::Forged)
        );
        assert_eq!(
            frame.verify(Some(&key), b"genmcp:other"),
            Err(Refused::Forged),
            "moved to another channel"
        );
        for at in [2, 10, 18, 30, HEADER_LEN] {
            let mut bent = f.clone();
            bent[at] ^= 1;
            let frame = decode(&bent).expect("decodes");
            assert_eq!(
                frame.verify(Some(&key), b"genmcp:tools"),
                Err(Refused::Forged),
                "byte {at} changed"
            );
        }
        // Without a key the tag is zeros and nothing is checked.
        let plain = framed(None, b"c", b"[]");
        assert!(plain[26..58].iter().all(|b| *b == 0));
        assert_eq!(decode(&plain).expect("decodes").verify(None, b"c"), Ok(()));
    }

    #[test]
    fn short_foreign_and_future_frames_are_malformed() {
        let key = BusKey::derive(&[1; 32]);
        let f = framed(Some(&key), b"c", b"");
        assert!(decode(&f).is_ok(), "an empty body is a frame");
        assert_eq!(decode(&f[..HEADER_LEN - 1]).err(), Some(Refused::Malformed));
        assert_eq!(
            decode(b"0123456789abcdef[{}]").err(),
            Some(Refused::Malformed)
        );
        let mut v2 = f.clone();
        v2[1] = 2;
        assert_eq!(decode(&v2).err(), Some(Refused::Malformed));
        assert_eq!(format!("{key:?}"), "BusKey(***)");
    }
}
