//! capfs's integration tests in one binary (one build and link instead of one per topic), a
//! module per topic:
//!
//! - `semantics`: every row of the semantics table, on both backends;
//! - `hostile`: hostile trees and paths, one table line each, with the outside canary checked;
//! - `races`: attacker threads exchanging directories while operations run;
//! - `root_races`: attacker threads exchanging names with sandbox roots while capfs renames and
//!   removes beside them;
//! - `copies`: what writes and copies hand out (no setuid, holes kept, identical contents);
//! - `denials`: the reason each refusal of the sandbox carries, and OS errors that keep their errno;
//! - `stat_paths`: special files looked at without being opened, links followed by `mkdir -p`,
//!   escape messages, local-disk roots;
//! - `cap_std_gaps`: the known gaps of cap-std that capfs covers itself;
//! - `properties`: property tests of paths, roots and random operation plans;
//! - `fuzz_regressions`: one test per finding of the fuzzers and property tests;
//! - `protocol`: the wire protocol spoken by hand against the real `capfs serve`;
//! - `codex_protocol`: the current codex protocol (URIs, sessions, walks, canonical paths) in
//!   process; `codex_handles`: its handles, watches, per-request sandbox and stdio framing;
//! - `codex_races`: its walks, canonical paths and handles beside an attacker thread;
//! - `streaming`: the data-frame extension, large files, bounded memory;
//! - `stream_bounds`: what one client can hold (blocking threads, file-work permits, slots),
//!   stream timeouts and aborts, the reply limit, unsized writes, write options, relays;
//! - `listening`: handshake budget and deadline, descriptor exhaustion, the shutdown deadline,
//!   start-up limits, the bearer scheme, audit of refused params, names that are not UTF-8;
//! - `outgoing`: the outgoing budget: a reply no share can hold, the flags at start-up;
//! - `operating`: the stdio transport, `--remote-command`, the audit log, `GET /readyz`;
//! - `load` (ignored; release, in `.ci/run`): the hostile connection shapes at once beside a
//!   well-behaved client, with thread, memory and latency figures;
//! - `faults`: servers killed mid-write, clients gone mid-upload, many clients at once;
//! - `cli`: the `capfs` client end to end against a real server, with pipes, FIFOs, symlinks;
//! - `hostile_server`, `lying_server`: the client against a fake server written in the test:
//!   its texts reach the terminal escaped; its frames, silences and lies are bounded errors;
//! - `client_names`: local names that are not UTF-8, shown escaped and acted on exactly;
//! - `audit_lines`: every field of an audit line bounded, each path once and as sent;
//! - `walk`: the confined tree walk, locally and as `capfs/walk`;
//! - `walk_bounds`: walks under descriptor limits (errors reported, a few descriptors held
//!   whatever the depth), and walk and listing replies cut to the message limit;
//! - `narrowing`: directories inside a root opened as roots of their own (`capfs/narrowRoots`);
//! - `process_wire`, `process_sessions`: the process methods on the wire over a test double
//!   of the process trait (`process_double`): order, input, bounds, sessions, policy, audit;
//!   `process_serve`, `process_cli`: through `capfs serve --exec`, `capfs exec` and
//!   `RemoteProcesses`; `process_egress`: the egress flags of `capfs serve`;
//! - `processes`: `LocalProcesses` (runs as root: an unprivileged user, cgroups): the shared
//!   escape table, and the bounds a shell command cannot show;
//! - `ranges`: `read_file_range`, locally and as `capfs/readFileRange`.
//!
//! `common` builds the test sandbox (roots, nested read-only root, outside canary) for either
//! backend, the remote ones on servers in the test process; `serve` starts the real binary on
//! port 0 and speaks raw WebSocket to it.

mod common;
mod serve;

mod audit_lines;
mod cap_std_gaps;
mod cli;
mod client_names;
mod codex_handles;
mod codex_protocol;
mod codex_races;
mod copies;
mod denials;
mod faults;
mod fleet;
mod fuzz_regressions;
mod hostile;
mod hostile_server;
mod identity;
mod listening;
mod load;
mod lying_server;
mod narrowing;
mod operating;
mod outgoing;
mod params;
mod process_cli;
mod process_double;
mod process_egress;
mod process_read_only;
mod process_serve;
mod process_sessions;
mod process_wire;
mod processes;
mod properties;
mod protocol;
mod races;
mod ranges;
mod root_races;
mod semantics;
mod stat_paths;
mod stream_bounds;
mod streaming;
mod walk;
mod walk_bounds;
mod walk_details;
