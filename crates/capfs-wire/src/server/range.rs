//! `capfs/readFileRange`: part of a file in one reply, read from its offset, so a client that
//! wants a file's last lines reads only those.

use serde_json::Value;

use super::handler::{Outcome, Payload, parse, reply_fits};
use crate::error;
use crate::protocol::{CAPFS_READ_FILE_STREAM_METHOD, ErrorObject, ReadRangeParams};
use capfs::ExecutorFileSystem;

/// Reads the range `params` asks for; a range whose reply would pass `max_message_bytes` is
/// refused before anything is read.
pub(crate) async fn read_range(
    fs: &dyn ExecutorFileSystem,
    params: Option<Value>,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let p: ReadRangeParams = parse(params)?;
    if !reply_fits(p.length, max_message_bytes) {
        let e = error::reply_too_large(&p.path, max_message_bytes, CAPFS_READ_FILE_STREAM_METHOD);
        return Err(ErrorObject::from_io(&e));
    }
    let data = fs
        .read_file_range(&p.path, p.offset, p.length)
        .await
        .map_err(|e| ErrorObject::from_io(&e))?;
    outcome.bytes = data.len() as u64;
    Ok(Payload::FileData(data))
}
