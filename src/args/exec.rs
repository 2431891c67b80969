//! The flags of `capfs exec`.

use crate::exec_flags::{ExecNetwork, parse_user};

/// What `capfs exec` runs, and how.
#[derive(Clone, Debug, clap::Args)]
pub struct ExecArgs {
    /// Run the command on a terminal of its own (like `ssh -t`): this terminal is put in raw
    /// mode, so Ctrl-C reaches the command as `^C`.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// The working directory, a sandbox path (default: the first read-write root).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// With --root: the unprivileged user (and group) the command runs as; required as root.
    #[arg(long, value_name = "UID[:GID]", value_parser = parse_user)]
    pub user: Option<(u32, u32)>,
    /// With --root: what the command may reach on the network.
    #[arg(long, value_enum, default_value = "none")]
    pub network: ExecNetwork,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}
