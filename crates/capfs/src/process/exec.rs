//! The `execve` of a confined program, which the program makes itself once its init and keeper
//! are in place (`init.rs`). The program shares the keeper's memory until that call, so every
//! string and pointer array is made here by the parent, and the search through `PATH` is the C
//! library's `execvp`'s (which runs an unconfined process, through the standard library): each
//! directory in order, a file that is not an executable format run by `/bin/sh`, a refusal
//! remembered while the search goes on.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString, c_char};
use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::error;

/// The longest path `execvp` tries; a longer `PATH` entry is passed over, as it does.
const PATH_MAX: usize = 4096;

/// The shell a file without an executable format is run by.
const SHELL: &std::ffi::CStr = c"/bin/sh";

/// A program's `execve`, ready to be made with no allocation.
pub(crate) struct Exec {
    /// The paths to try in order: the program itself when its name holds a `/`, else each
    /// entry of `PATH` followed by the name.
    paths: Vec<CString>,
    /// The arguments, the first being `arg0` when the request names one.
    args: Vec<CString>,
    /// `name=value` for each variable.
    vars: Vec<CString>,
    /// Null-terminated arrays pointing into `args` and `vars`.
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    /// The shell's arguments for a file without an executable format: the shell, the path
    /// tried (set when it is known), then every argument but the first.
    script: Vec<*const c_char>,
}

// SAFETY: the pointers point into the heap buffers of the `CString`s this value owns, which are
// never changed or dropped before it; only `run`, through `&mut self`, writes `script`.
#[allow(unsafe_code)]
unsafe impl Send for Exec {}
// SAFETY: as above; `&Exec` reads nothing but the pointers.
#[allow(unsafe_code)]
unsafe impl Sync for Exec {}

impl std::fmt::Debug for Exec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exec")
            .field("paths", &self.paths)
            // Arguments and values may hold secrets; their numbers are enough.
            .field("args", &self.args.len())
            .field("vars", &self.vars.len())
            .finish_non_exhaustive()
    }
}

impl Exec {
    /// The `execve` of the program `args` names first, with `args` (the first replaced by
    /// `arg0` if given) and exactly the variables of `env`.
    pub(crate) fn new(
        args: &[String],
        arg0: Option<&str>,
        env: &BTreeMap<OsString, OsString>,
    ) -> io::Result<Self> {
        let c = |bytes: &[u8]| CString::new(bytes).map_err(|_| error::nul_in_argument());
        let program = args.first().ok_or_else(error::empty_argv)?;
        let first = arg0.unwrap_or(program);
        let args = std::iter::once(first)
            .chain(args.iter().skip(1).map(String::as_str))
            .map(|a| c(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let vars = env
            .iter()
            .map(|(name, value)| {
                let mut var = name.as_bytes().to_vec();
                var.push(b'=');
                var.extend_from_slice(value.as_bytes());
                c(&var)
            })
            .collect::<io::Result<Vec<_>>>()?;
        let path = env.get(OsStr::new("PATH")).map(|p| p.as_bytes());
        let paths = search(program.as_bytes(), path)
            .iter()
            .map(|p| c(p))
            .collect::<io::Result<Vec<_>>>()?;
        let array = |strings: &[CString]| {
            let pointers = strings.iter().map(|s| s.as_ptr());
            pointers.chain([std::ptr::null()]).collect::<Vec<_>>()
        };
        let (argv, envp) = (array(&args), array(&vars));
        let script = [SHELL.as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(argv[1..].iter().copied())
            .collect();
        Ok(Self {
            paths,
            args,
            vars,
            argv,
            envp,
            script,
        })
    }

    /// In the program: replaces it by the program, or returns why no path could run, as
    /// `execvp` does. A refusal (`EACCES`) or an error saying the path is not there (`ENOENT`,
    /// `ENOTDIR`, `ESTALE`, `ENODEV`, `ETIMEDOUT`) goes on to the next path; any other error
    /// ends the search at once. After the last path: `EACCES` if one was refused, else the
    /// last error.
    #[allow(unsafe_code)]
    pub(crate) fn run(&mut self) -> io::Error {
        let mut refused = false;
        let mut last = libc::ENOENT;
        for path in &self.paths {
            // SAFETY: a path and two null-terminated arrays of strings this value owns.
            unsafe { libc::execve(path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
            let mut errno = last_errno();
            if errno == libc::ENOEXEC {
                self.script[1] = path.as_ptr();
                // SAFETY: as above, with the shell's arguments.
                unsafe { libc::execve(SHELL.as_ptr(), self.script.as_ptr(), self.envp.as_ptr()) };
                errno = last_errno();
            }
            match errno {
                libc::EACCES => refused = true,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => return io::Error::from_raw_os_error(errno),
            }
            last = errno;
        }
        io::Error::from_raw_os_error(if refused { libc::EACCES } else { last })
    }
}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The paths `execvp` tries for `program` under `path` (the variable's value): the program
/// itself if its name holds a `/`; else, for each entry of `path` shorter than `PATH_MAX`,
/// the entry, a `/` and the name, or the bare name for an empty entry (the working
/// directory). With no `PATH`, the C library's default.
fn search(program: &[u8], path: Option<&[u8]>) -> Vec<Vec<u8>> {
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    let path = path.unwrap_or(b"/bin:/usr/bin");
    path.split(|b| *b == b':')
        .filter(|dir| dir.len() < PATH_MAX)
        .map(|dir| match dir {
            [] => program.to_vec(),
            dir => [dir, b"/", program].concat(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(paths: Vec<Vec<u8>>) -> Vec<String> {
        paths
            .into_iter()
            .map(|p| String::from_utf8(p).unwrap())
            .collect()
    }

    #[test]
    fn a_name_is_looked_for_in_each_entry_in_order_and_an_empty_entry_is_the_working_directory() {
        let found = strings(search(b"ls", Some(b"/usr/local/bin::/bin:")));
        assert_eq!(found, ["/usr/local/bin/ls", "ls", "/bin/ls", "ls"]);
    }

    #[test]
    fn a_name_with_a_slash_is_tried_alone() {
        assert_eq!(strings(search(b"./run.sh", Some(b"/bin"))), ["./run.sh"]);
        assert_eq!(strings(search(b"/bin/ls", None)), ["/bin/ls"]);
    }

    #[test]
    fn an_entry_too_long_for_a_path_is_passed_over() {
        let long = vec![b'd'; PATH_MAX];
        let path = [&long[..], b":/bin"].concat();
        assert_eq!(strings(search(b"ls", Some(&path))), ["/bin/ls"]);
    }

    /// The string at `p`, a pointer into a `CString` an `Exec` owns.
    #[allow(unsafe_code)]
    fn text(p: *const c_char) -> String {
        // SAFETY: the callers pass pointers into strings that outlive the call.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn the_arrays_hold_arg0_the_arguments_and_exactly_the_environment() {
        let env = BTreeMap::from([
            (OsString::from("PATH"), OsString::from("/bin")),
            (OsString::from("A"), OsString::from("x=y")),
        ]);
        let args = ["ls".to_owned(), "-l".to_owned()];
        let exec = Exec::new(&args, Some("list"), &env).unwrap();
        let argv: Vec<_> = exec.argv[..2].iter().map(|p| text(*p)).collect();
        assert_eq!(argv, ["list", "-l"]);
        assert!(exec.argv[2].is_null());
        let envp: Vec<_> = exec.envp[..2].iter().map(|p| text(*p)).collect();
        assert_eq!(envp, ["A=x=y", "PATH=/bin"]);
        assert!(exec.envp[2].is_null());
        assert_eq!(text(exec.script[0]), "/bin/sh");
        assert_eq!(text(exec.script[2]), "-l");
        assert!(exec.script[3].is_null());
        assert_eq!(exec.paths, [c"/bin/ls"]);
    }
}
