//! The stdio writer task: every frame of the pipe goes out here, as lines,
//! so lines never interleave. Each wake-up drains the ready frames (up to a
//! bound) into one reused buffer, then one write and one flush.

use std::io;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::mux::{Frame, OutboxReceiver};
use crate::runtime::Server;

/// Ready frames written together at most.
const MAX_FRAMES_PER_WRITE: usize = 1024;
/// Bytes written together at most (the last frame may take a write past it).
const MAX_WRITE_BYTES: usize = 256 * 1024;

/// Bytes of write buffer the writer keeps between writes once nothing is
/// ready (8 KiB).
///
/// While frames keep coming the buffer is reused as it is, up to what a
/// batch of [`MAX_WRITE_BYTES`] grows it to; once a write leaves nothing
/// ready, it is shrunk back to this. A notification line is 100 to 300
/// bytes and a typical response a few KiB (`tools/list` of the demo suite:
/// about 2 KiB), so the replies and notifications of ordinary traffic fit
/// and are written without allocating; a 64 KiB reservation up front bought
/// nothing more than this for them.
const WRITE_BUFFER_FLOOR: usize = 8 * 1024;

/// Past this the buffer was grown by a frame larger than a whole batch (a
/// big `resources/read`): it is shrunk right after the write, ready frames
/// or not. A batch of ordinary frames stops once past [`MAX_WRITE_BYTES`],
/// which a doubling `Vec` holds in at most twice that.
const BATCH_BUFFER_LIMIT: usize = 2 * MAX_WRITE_BYTES;

/// Writes every frame of `rx` as a line to `out`, until every sender has
/// gone. Frames of a cancelled stream still in the queue are dropped here,
/// not counted.
pub(super) async fn write_frames<W: AsyncWrite + Unpin>(
    mut rx: OutboxReceiver,
    mut out: W,
    server: Server,
) -> io::Result<()> {
    let mut lines = Lines::default();
    let mut ready = None;
    loop {
        let first = match ready.take() {
            Some(frame) => frame,
            None => match rx.recv().await {
                Some(frame) => frame,
                None => return Ok(()),
            },
        };
        let frames = lines.fill(first, &mut rx);
        if frames > 0 {
            out.write_all(&lines.buf).await?;
            out.flush().await?;
            server.count_frames(frames);
        }
        ready = rx.try_recv().ok();
        lines.written(ready.is_none());
    }
}

/// The writer's reused buffer of lines.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// Fills the buffer with `first` and the frames ready after it, up to
    /// [`MAX_FRAMES_PER_WRITE`] and [`MAX_WRITE_BYTES`]; returns the lines
    /// written (revoked frames are taken and skipped).
    fn fill(&mut self, first: Frame, rx: &mut OutboxReceiver) -> u64 {
        self.buf.clear();
        let mut lines = 0;
        let mut taken = 0;
        let mut next = Some(first);
        while let Some(frame) = next.take() {
            taken += 1;
            // An empty frame (`Channel::close_sse_stream`) has no line.
            if !frame.is_revoked() && (!frame.is_empty() || frame.last) {
                frame.write_to(&mut self.buf);
                self.buf.push(b'\n');
                lines += 1;
            }
            if taken < MAX_FRAMES_PER_WRITE && self.buf.len() < MAX_WRITE_BYTES {
                next = rx.try_recv().ok();
            }
        }
        lines
    }

    /// The buffer was written; `idle` when no frame is ready. Gives back
    /// what an oversized frame grew at once, and what a burst grew once
    /// idle, down to [`WRITE_BUFFER_FLOOR`].
    fn written(&mut self, idle: bool) {
        let cap = self.buf.capacity();
        if cap > WRITE_BUFFER_FLOOR && (idle || cap > BATCH_BUFFER_LIMIT) {
            self.buf.clear();
            self.buf.shrink_to(WRITE_BUFFER_FLOOR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::outbox;

    fn frame(bytes: usize) -> Frame {
        Frame::message(vec![b'x'; bytes])
    }

    #[test]
    fn a_large_frame_leaves_no_large_buffer_behind() {
        let (tx, mut rx) = outbox(8);
        let mut lines = Lines::default();
        // A 4 MiB `resources/read` with more frames right behind it.
        assert_eq!(lines.fill(frame(4 << 20), &mut rx), 1);
        assert!(lines.buf.capacity() > 4 << 20);
        lines.written(false);
        assert!(
            lines.buf.capacity() <= WRITE_BUFFER_FLOOR,
            "kept {} bytes after a large write",
            lines.buf.capacity()
        );
        tx.try_send(frame(100)).expect("room");
        drop(tx);
    }

    #[test]
    fn a_burst_keeps_its_buffer_while_busy_and_gives_it_back_when_idle() {
        let (tx, mut rx) = outbox(2048);
        // 300 KB of frames: more than one write takes.
        for _ in 0..1000 {
            tx.try_send(frame(300)).expect("room");
        }
        let mut lines = Lines::default();
        let mut written = 0;
        let first = rx.try_recv().expect("a frame");
        written += lines.fill(first, &mut rx);
        let burst = lines.buf.capacity();
        assert!(burst > WRITE_BUFFER_FLOOR);
        // More is ready: the buffer is reused as it is.
        lines.written(false);
        assert_eq!(lines.buf.capacity(), burst);
        let first = rx.try_recv().expect("the rest of the burst");
        written += lines.fill(first, &mut rx);
        assert_eq!(written, 1000);
        // Nothing ready: back to the floor, which ordinary traffic keeps.
        lines.written(true);
        assert!(
            lines.buf.capacity() <= WRITE_BUFFER_FLOOR,
            "kept {} bytes once idle",
            lines.buf.capacity()
        );
        tx.try_send(frame(300)).expect("room");
        let first = rx.try_recv().expect("a frame");
        lines.fill(first, &mut rx);
        lines.written(true);
        let kept = lines.buf.capacity();
        assert!(kept > 0 && kept <= WRITE_BUFFER_FLOOR, "{kept}");
    }
}
