//! Data frames: the binary WebSocket frames that carry streamed contents beside the JSON
//! messages.

/// First byte of a data frame. JSON text never starts with it, so a binary frame is a data frame
/// exactly when it starts with this byte.
pub const DATA_FRAME_TAG: u8 = 0x00;
/// First byte of the data frame that ends an unsized streamed write (one whose request has no
/// `size`); its payload, possibly empty, is the last of the contents.
pub const DATA_FRAME_LAST_TAG: u8 = 0x01;
/// Length of a data frame's header: the tag and the stream id (u64, big-endian).
pub const DATA_FRAME_HEADER_LEN: usize = 9;
/// The payload size capfs puts in one data frame.
pub const DATA_CHUNK_BYTES: usize = 256 * 1024;

/// The header of a data frame of stream `stream_id`.
pub fn data_frame_header(stream_id: u64) -> [u8; DATA_FRAME_HEADER_LEN] {
    let mut header = [0u8; DATA_FRAME_HEADER_LEN];
    header[0] = DATA_FRAME_TAG;
    header[1..].copy_from_slice(&stream_id.to_be_bytes());
    header
}

/// The header of the data frame that ends unsized stream `stream_id`.
pub fn data_frame_last_header(stream_id: u64) -> [u8; DATA_FRAME_HEADER_LEN] {
    let mut header = data_frame_header(stream_id);
    header[0] = DATA_FRAME_LAST_TAG;
    header
}

/// The stream id of a data frame of either tag, and whether it is the last frame of an unsized
/// write; `None` when `frame` is not a data frame.
pub fn data_frame_kind(frame: &[u8]) -> Option<(u64, bool)> {
    if frame.len() < DATA_FRAME_HEADER_LEN {
        return None;
    }
    let last = match frame[0] {
        DATA_FRAME_TAG => false,
        DATA_FRAME_LAST_TAG => true,
        _ => return None,
    };
    let mut id = [0u8; 8];
    id.copy_from_slice(&frame[1..DATA_FRAME_HEADER_LEN]);
    Some((u64::from_be_bytes(id), last))
}

/// The stream id of a data frame, or `None` when `frame` is not one.
pub fn data_frame_stream(frame: &[u8]) -> Option<u64> {
    if frame.len() < DATA_FRAME_HEADER_LEN || frame[0] != DATA_FRAME_TAG {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&frame[1..DATA_FRAME_HEADER_LEN]);
    Some(u64::from_be_bytes(id))
}
