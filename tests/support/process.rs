//! Child processes of a test: stdout and stderr in log files, stopped (and
//! reaped) when dropped, panics included.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A running child process.
pub struct Process {
    name: String,
    child: Mutex<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Process {
    /// Starts `command` with stdin closed, its stdout in `DIR/NAME.stdout`
    /// and its stderr in `DIR/NAME.stderr`.
    pub fn spawn(name: &str, command: &mut Command, dir: &Path) -> Process {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        Process {
            name: name.to_string(),
            child: Mutex::new(child),
            stdout,
            stderr,
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// Everything the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The end of both logs, for failure messages.
    pub fn tail(&self) -> String {
        format!(
            "--- end of {name}'s stdout\n{}\n--- end of {name}'s stderr\n{}",
            last_chars(&self.stdout(), 2000),
            last_chars(&self.stderr(), 4000),
            name = self.name
        )
    }

    /// The exit status, once the process has exited.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.child.lock().unwrap().try_wait().ok().flatten()
    }

    /// Panics, with the logs, when the process has exited.
    pub fn assert_running(&self) {
        if let Some(status) = self.exited() {
            panic!("{} exited with {status}\n{}", self.name, self.tail());
        }
    }

    /// Sends SIGTERM (a process's own graceful shutdown: nginx's master
    /// stops its workers, llmprobe ends its requests).
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.id().to_string()])
            .status();
    }

    /// Sends SIGINT, as Ctrl-C at a terminal does.
    pub fn interrupt(&self) {
        interrupt(self.id());
    }

    /// Waits at most `limit` for the process to exit.
    pub fn wait_exit(&self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        self.terminate();
        if self.wait_exit(Duration::from_secs(5)).is_none() {
            let child = self.child.get_mut().unwrap();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends SIGINT to process `pid` (Ctrl-C), through kill(1) as
/// [`Process::terminate`] does.
pub fn interrupt(pid: u32) {
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
}

/// The last `n` bytes of `text`, cut at a character boundary.
fn last_chars(text: &str, n: usize) -> &str {
    let start = text.len().saturating_sub(n);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

/// stdout and stderr of a finished command, one after the other.
pub fn output_text(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Panics, showing both outputs, unless the command succeeded.
pub fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed with {}\n{}",
        out.status,
        output_text(out)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_chars_cuts_at_a_character_boundary() {
        assert_eq!(last_chars("abcdef", 3), "def");
        assert_eq!(last_chars("ab", 3), "ab");
        // "é" is two bytes: the cut moves past it rather than into it.
        assert_eq!(last_chars("xé", 1), "");
        assert_eq!(last_chars("xéy", 3), "éy");
    }
}
