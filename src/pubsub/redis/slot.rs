//! The Redis Cluster hash slot of a key or shard channel: CRC16 (XMODEM) of
//! the key, or of its hash tag (the text between the first `{` and the next
//! `}`, when not empty), modulo 16,384 — what `CLUSTER KEYSLOT` answers.

/// The number of hash slots of a Redis Cluster.
pub(super) const SLOTS: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster
/// uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty one.
fn hashed(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}')
            && close > 0
        {
            return &rest[..close];
        }
    }
    key
}

/// The hash slot of `key` (a key or a shard channel name).
pub(super) fn of(key: &[u8]) -> u16 {
    crc16(hashed(key)) % SLOTS
}

/// Whether `slot` is in one of `ranges` (inclusive bounds).
pub(super) fn within(slot: u16, ranges: &[(u16, u16)]) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= slot && slot <= hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` (and the Redis Cluster specification).
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(of(b"foo"), 12182);
        assert_eq!(of(b"bar"), 5061);
        assert_eq!(of(b"{user1000}.following"), of(b"user1000"));
        assert_eq!(of(b"foo{}{bar}"), of(b"foo{}{bar}"));
        assert_eq!(hashed(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hashed(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hashed(b"foo{bar}{zap}"), b"bar");
        assert!(within(5, &[(0, 5)]) && !within(6, &[(0, 5), (7, 9)]));
    }
}
