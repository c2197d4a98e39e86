//! Property tests (seeded, bounded) for what decodes messages from Redis: the
//! bus's wire format ([`genmcp::pubsub::redis::wire`]). Arbitrary bytes never
//! panic; a sealed frame decodes to what was sealed and verifies only under
//! its key and channel; any change to a sealed frame is refused.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test --release --test fuzz_bus`.

#[path = "common/fuzz.rs"]
mod fuzz;

use fuzz::runner;
use genmcp::pubsub::redis::wire::{self, BusKey, HEADER_LEN, Header};
use proptest::prelude::*;

/// This file's fuzz seed.
const SEED: u8 = 0x62;

#[test]
fn arbitrary_bytes_never_panic_the_decoder() {
    let key = BusKey::derive(&[7; 32]);
    runner(2_000, SEED)
        .run(
            &(prop::collection::vec(any::<u8>(), 0..256), any::<bool>()),
            |(bytes, magic)| {
                let mut bytes = bytes;
                if magic && bytes.len() >= 2 {
                    // Half the cases get past the magic and version.
                    bytes[0] = wire::MAGIC;
                    bytes[1] = wire::VERSION;
                }
                if let Ok(frame) = wire::decode(&bytes) {
                    prop_assert!(bytes.len() >= HEADER_LEN);
                    prop_assert_eq!(frame.body, &bytes[HEADER_LEN..]);
                    prop_assert!(frame.verify(Some(&key), b"c").is_err());
                }
                Ok(())
            },
        )
        .expect("no panic, no forged frame accepted");
}

#[test]
fn sealed_frames_round_trip_and_any_changed_byte_is_refused() {
    let key = BusKey::derive(&[9; 32]);
    runner(500, SEED)
        .run(
            &(
                any::<(u64, u64, u64)>(),
                prop::collection::vec(any::<u8>(), 0..128),
                ".{0,16}",
                any::<prop::sample::Index>(),
            ),
            |((node, seq, sent_ms), body, channel, at)| {
                let mut frame = wire::buffer(body.len());
                frame.extend_from_slice(&body);
                let header = Header { node, seq, sent_ms };
                wire::seal(&mut frame, header, Some(&key), channel.as_bytes());
                let decoded = wire::decode(&frame).expect("a sealed frame decodes");
                prop_assert_eq!(decoded.header, header);
                prop_assert_eq!(decoded.body, &body[..]);
                prop_assert!(decoded.verify(Some(&key), channel.as_bytes()).is_ok());
                let mut bent = frame.clone();
                let i = at.index(bent.len());
                bent[i] ^= 0x01;
                match wire::decode(&bent) {
                    Ok(f) => prop_assert!(f.verify(Some(&key), channel.as_bytes()).is_err()),
                    Err(_) => prop_assert!(i < 2, "only the magic or version byte"),
                }
                Ok(())
            },
        )
        .expect("round trip");
}
