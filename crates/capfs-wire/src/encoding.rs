//! Base64 as the protocol uses it (the standard alphabet, padded), with the vector
//! instructions the CPU has: a file's contents are encoded into every read reply and decoded
//! from every write, and the scalar engine spends more on a 4 KiB `fs/readFile` than the
//! server does on everything else in it.

use std::sync::LazyLock;

use base64::engine::{Simd, general_purpose};

/// The engine, chosen once for the CPU it runs on (scalar where there is no AVX2 or NEON).
pub(crate) static STANDARD: LazyLock<Simd> = LazyLock::new(|| Simd::standard(general_purpose::PAD));
