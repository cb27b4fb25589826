//! How a session's command carries its state to the next: each command runs
//! in bash as `bash -c SCRIPT bash LINE DIR`. The script starts in the
//! session's working directory `DIR` (when the call did not name one),
//! runs `LINE` with `eval` (the same grammar as `bash -c LINE`), and at exit
//! writes the working directory and the exported variables, NUL-separated,
//! to descriptor 3, which the host reads and passes to the next command.
//! The line itself runs with descriptor 3 closed. A line that replaces the
//! shell (`exec`) or sets its own `EXIT` trap leaves the state as it was.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// `PATH` of commands unless the profile passes the host's.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The script; `$1` is the line, `$2` the directory to start in (empty:
/// the one the shell was started in), `$3` a file to write the state to
/// instead of descriptor 3 (empty: descriptor 3).
pub(crate) const SCRIPT: &str = r#"__toolhost_line=$1
if [ -n "$3" ]; then exec 3>"$3"; fi
if [ -n "$2" ]; then
  cd -- "$2" 2>/dev/null || printf 'toolhost: the session'"'"'s working directory %s is gone; the command starts in %s\n' "$2" "$PWD" >&2
fi
set --
__toolhost_save() {
  __toolhost_status=$?
  {
    printf '%s\0' "$PWD"
    for __toolhost_name in $(compgen -e); do
      printf '%s=%s\0' "$__toolhost_name" "${!__toolhost_name}"
    done
  } 2>/dev/null >&3
  exit "$__toolhost_status"
}
trap __toolhost_save EXIT
eval -- "$__toolhost_line" 3>&-
"#;

/// Most bytes of state read back; a command that exports more leaves the
/// session's state as it was.
pub(crate) const MOST_STATE: usize = 1 << 20;

/// Variables the shell sets itself, not carried.
const SHELLS_OWN: &[&str] = &["PWD", "SHLVL", "_"];

/// A number no other session of this process is likely to draw: names of
/// state files on a remote host, of containers and their mask directory.
pub(crate) fn nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// A session's state between commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShellState {
    /// The working directory the last command left.
    pub(crate) dir: Option<String>,
    /// The exported variables it left: the whole environment of the next
    /// command.
    pub(crate) env: Option<Vec<(String, OsString)>>,
}

impl ShellState {
    /// The state written by the script, or `None` when nothing (or
    /// something else) was written.
    pub(crate) fn parse(bytes: &[u8]) -> Option<Self> {
        let mut fields = bytes.split(|&b| b == 0);
        let dir = fields.next().filter(|dir| dir.starts_with(b"/"))?;
        let dir = String::from_utf8(dir.to_vec()).ok()?;
        let mut env = Vec::new();
        for field in fields.filter(|field| !field.is_empty()) {
            let split = field.iter().position(|&b| b == b'=')?;
            let name = std::str::from_utf8(&field[..split]).ok()?;
            if SHELLS_OWN.contains(&name) {
                continue;
            }
            env.push((
                name.to_string(),
                OsString::from_vec(field[split + 1..].to_vec()),
            ));
        }
        Some(Self {
            dir: Some(dir),
            env: Some(env),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_the_directory_then_the_variables() {
        let state = ShellState::parse(b"/w/sub\0X=1\0PWD=/w/sub\0Y=a=b\0SHLVL=1\0").unwrap();
        assert_eq!(state.dir.as_deref(), Some("/w/sub"));
        assert_eq!(
            state.env.unwrap(),
            [
                ("X".to_string(), OsString::from("1")),
                ("Y".to_string(), OsString::from("a=b"))
            ]
        );
    }

    #[test]
    fn anything_else_is_no_state() {
        assert_eq!(ShellState::parse(b""), None);
        assert_eq!(ShellState::parse(b"relative\0X=1\0"), None);
        assert_eq!(ShellState::parse(b"/w\0no equals sign\0"), None);
    }

    #[test]
    fn the_script_carries_directory_and_exports_through_bash() {
        let Ok(bash) = which_bash() else { return };
        let dir = std::env::temp_dir();
        let output = std::process::Command::new(bash)
            .args(["-c", SCRIPT, "bash", "cd / && export X='a b' && exit 3"])
            .arg(&dir)
            .env_clear()
            .output_with_fd3();
        let (status, state) = output;
        assert_eq!(status, Some(3));
        let state = ShellState::parse(&state).unwrap();
        assert_eq!(state.dir.as_deref(), Some("/"));
        let env = state.env.unwrap();
        assert!(
            env.contains(&("X".to_string(), OsString::from("a b"))),
            "{env:?}"
        );
    }

    fn which_bash() -> Result<&'static str, ()> {
        ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or(())
    }

    trait WithFd3 {
        fn output_with_fd3(&mut self) -> (Option<i32>, Vec<u8>);
    }

    impl WithFd3 for std::process::Command {
        /// Runs with a pipe at descriptor 3; the exit code and what came
        /// through it.
        fn output_with_fd3(&mut self) -> (Option<i32>, Vec<u8>) {
            use std::io::Read;
            use std::os::fd::AsRawFd;
            use std::os::unix::process::CommandExt;
            let (mut read, write) = std::io::pipe().unwrap();
            let raw = write.as_raw_fd();
            // SAFETY: dup2 is async-signal-safe.
            unsafe {
                self.pre_exec(move || {
                    if libc::dup2(raw, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = self.spawn().unwrap();
            drop(write);
            let mut state = Vec::new();
            read.read_to_end(&mut state).unwrap();
            (child.wait().unwrap().code(), state)
        }
    }
}
