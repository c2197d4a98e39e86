//! Counting SSE events in raw response bytes without parsing them.
//!
//! Every event the bench receives is one `data:` line; a line starts after a
//! `\n` (the end of the previous line, of an HTTP chunk-size line, or of the
//! response head), so `\ndata:` marks exactly one event, whatever the event
//! looks like (`event:` line or not, a space after the colon or not, `\r\n`
//! or `\n` line ends) and never matches inside a JSON payload (JSON escapes
//! newlines). The search is `memchr`'s SIMD substring search, many GB/s: the
//! client spends its time in `read`, not in counting.

use std::sync::LazyLock;

use memchr::memmem::Finder;

const MARK: &[u8] = b"\ndata:";
/// Bytes of a mark that can sit at the end of one read with the rest in the
/// next.
const KEEP: usize = MARK.len() - 1;

static FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(MARK));

/// Counts SSE events across reads; a mark may straddle two reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrameCounter {
    tail: [u8; KEEP],
    tail_len: usize,
}

impl FrameCounter {
    /// The events whose `data:` line starts in `bytes` (or straddles the
    /// previous read and this one).
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut seen = FINDER.find_iter(bytes).count();
        if self.tail_len > 0 {
            // A mark straddling the boundary starts in the tail and ends in
            // `bytes`; the tail is shorter than a mark, so any match that
            // starts in it straddles.
            let mut joint = [0u8; 2 * KEEP];
            let head = bytes.len().min(KEEP);
            joint[..self.tail_len].copy_from_slice(&self.tail[..self.tail_len]);
            joint[self.tail_len..self.tail_len + head].copy_from_slice(&bytes[..head]);
            seen += FINDER
                .find_iter(&joint[..self.tail_len + head])
                .filter(|&at| at < self.tail_len)
                .count();
        }
        self.keep_tail(bytes);
        seen
    }

    fn keep_tail(&mut self, bytes: &[u8]) {
        if bytes.len() >= KEEP {
            self.tail.copy_from_slice(&bytes[bytes.len() - KEEP..]);
            self.tail_len = KEEP;
        } else {
            // Short read: the old tail's end, then these bytes.
            let keep_old = (KEEP - bytes.len()).min(self.tail_len);
            let mut next = [0u8; KEEP];
            next[..keep_old].copy_from_slice(&self.tail[self.tail_len - keep_old..self.tail_len]);
            next[keep_old..keep_old + bytes.len()].copy_from_slice(bytes);
            self.tail = next;
            self.tail_len = keep_old + bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FrameCounter;

    fn frames(n: usize) -> Vec<u8> {
        let mut all = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
        for i in 0..n {
            let frame = format!("event: message\ndata: {{\"n\":{i},\"s\":\"data: x\"}}\n\n");
            all.extend_from_slice(format!("{:x}\r\n", frame.len()).as_bytes());
            all.extend_from_slice(frame.as_bytes());
            all.extend_from_slice(b"\r\n");
        }
        all.extend_from_slice(b": keep-alive\n\n");
        all
    }

    #[test]
    fn every_split_of_a_stream_counts_each_event_once() {
        let all = frames(5);
        for chunk in 1..all.len() {
            let mut c = FrameCounter::default();
            let seen: usize = all.chunks(chunk).map(|b| c.feed(b)).sum();
            assert_eq!(seen, 5, "chunks of {chunk}");
        }
    }

    #[test]
    fn marks_split_across_reads_are_counted_once() {
        let mut c = FrameCounter::default();
        assert_eq!(c.feed(b"event: message\nda"), 0);
        assert_eq!(c.feed(b"ta: {}\n\nevent: message\ndata: {}\n\n\ndata:"), 3);
        assert_eq!(c.feed(b"\n"), 0);
        assert_eq!(c.feed(b"d"), 0);
        assert_eq!(c.feed(b"a"), 0);
        assert_eq!(c.feed(b"ta"), 0);
        assert_eq!(c.feed(b":{}"), 1);
    }
}
