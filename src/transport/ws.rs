//! What the client and the server share about driving a WebSocket.

use bytes::BytesMut;

use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN};

/// Room a data-frame arena is given at a time: four frames, about what a queue of a few
/// messages holds, so that by the time it fills again the writer has usually sent them all.
const FRAME_ARENA_BYTES: usize = 4 * (DATA_FRAME_HEADER_LEN + DATA_CHUNK_BYTES);

/// Starts a data frame of `header` and up to `payload_len` bytes in `arena`, to be filled and
/// then taken with `arena.split().freeze()`. Once the writer has sent every frame of an arena,
/// its memory holds the next ones instead of a fresh allocation (whose pages the kernel would
/// zero and fault in, for every frame).
pub(crate) fn start_frame(arena: &mut BytesMut, header: &[u8], payload_len: usize) {
    if arena.capacity() < header.len() + payload_len {
        arena.reserve(FRAME_ARENA_BYTES);
    }
    arena.extend_from_slice(header);
}
