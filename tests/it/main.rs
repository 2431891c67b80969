//! capfs's integration tests in one binary (one build and link instead of one per topic), a
//! module per topic:
//!
//! - `semantics`: every row of the semantics table, on both backends;
//! - `hostile`: hostile trees and paths, one table line each, with the outside canary checked;
//! - `races`: attacker threads exchanging directories while operations run;
//! - `cap_std_gaps`: the known gaps of cap-std that capfs covers itself;
//! - `properties`: property tests of paths, roots and random operation plans;
//! - `fuzz_regressions`: one test per finding of the fuzzers and property tests;
//! - `protocol`: the wire protocol spoken by hand against the real `capfs serve`;
//! - `streaming`: the data-frame extension, large files, bounded memory;
//! - `operating`: the stdio transport, `--remote-command`, the audit log, `GET /readyz`;
//! - `faults`: servers killed mid-write, clients gone mid-upload, many clients at once.
//! - `walk`: the confined tree walk, locally and as `capfs/walk`.
//!
//! `common` builds the test sandbox (roots, nested read-only root, outside canary) for either
//! backend; `serve` starts the real binary on port 0 and speaks raw WebSocket to it.

mod common;
mod serve;

mod cap_std_gaps;
mod faults;
mod fuzz_regressions;
mod hostile;
mod operating;
mod properties;
mod protocol;
mod races;
mod semantics;
mod streaming;
mod walk;
