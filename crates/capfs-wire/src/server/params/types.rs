//! What each params type names as paths, and what its method does to each: the [`Params`] of
//! every method's params.

use super::Params;
use crate::protocol::codex::{
    CloseParams, CodexWalkParams, EnvironmentConfigReadParams, OpenMode, OpenParams,
    ReadBlockParams, SandboxContext, WriteBlockParams,
};
use crate::protocol::process::{
    ReadParams, ResizeParams, SignalParams, StartParams, TerminateParams, WriteParams,
};
use crate::protocol::{
    CopyParams, CreateDirectoryParams, CreateSymlinkParams, NarrowRootsParams, PathParams,
    ReadRangeParams, ReadStreamParams, RemoveParams, RenameParams, WalkParams, WirePath,
    WriteFileParams, WriteStreamParams,
};
use crate::server::codex::policy::Need;
use crate::server::codex::watch::WatchParams;

/// Implements [`Params`] for a type whose members named `$path` are the paths it names, each
/// with the need given.
macro_rules! paths {
    ($ty:ty: $($path:ident => $need:expr),+) => {
        impl Params for $ty {
            fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
                [$((&self.$path, $need)),+].into_iter()
            }

            fn sandbox(&self) -> Option<&SandboxContext> {
                self.sandbox.as_ref()
            }
        }
    };
}

paths!(PathParams: path => Need::Read);
paths!(ReadRangeParams: path => Need::Read);
paths!(ReadStreamParams: path => Need::Read);
paths!(WalkParams: path => Need::Read);
paths!(CodexWalkParams: path => Need::Read);
paths!(WriteFileParams: path => Need::Write);
paths!(WriteStreamParams: path => Need::Write);
paths!(CreateDirectoryParams: path => Need::Write);
paths!(RemoveParams: path => Need::Write);
paths!(CopyParams: source_path => Need::Read, destination_path => Need::Write);
paths!(RenameParams: source_path => Need::Write, destination_path => Need::Write);

impl Params for CreateSymlinkParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        std::iter::once((&self.path, Need::Write))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }

    fn link_target(&self) -> Option<&str> {
        Some(&self.target)
    }
}

impl Params for OpenParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        let need = match self.mode {
            OpenMode::Replace => Need::Write,
            _ => Need::Read,
        };
        std::iter::once((&self.path, need))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }
}

impl Params for WatchParams {
    fn paths(&self) -> impl Iterator<Item = (&WirePath, Need)> {
        let paths = self.present.iter().chain(&self.missing);
        paths.map(|path| (path, Need::Read))
    }

    fn sandbox(&self) -> Option<&SandboxContext> {
        self.sandbox.as_ref()
    }
}

/// Params that name no path the server checks: handles already checked when opened, the
/// environment's, the processes' (whose handlers read their own `cwd` and policy), the roots a
/// connection narrows to (each checked by the narrowing itself).
macro_rules! no_paths {
    ($($ty:ty),+ $(,)?) => {
        $(impl Params for $ty {})+
    };
}

no_paths!(
    ReadBlockParams,
    WriteBlockParams,
    CloseParams,
    EnvironmentConfigReadParams,
    StartParams,
    ReadParams,
    WriteParams,
    SignalParams,
    TerminateParams,
    ResizeParams,
    NarrowRootsParams,
);
