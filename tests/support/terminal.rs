//! A command run in a pseudo-terminal, as a person at a terminal runs it:
//! util-linux `script` makes the terminal and logs what it shows, the
//! command's standard output goes to a file (so the terminal shows only
//! its standard error), and its process id is known, for signals.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::{self, Process};

/// A command running in a pseudo-terminal; stopped when dropped.
pub struct Terminal {
    /// `script`, with what the terminal showed as its stdout log.
    pub process: Process,
    pid_file: PathBuf,
}

impl Terminal {
    /// Starts `program args...` in a terminal 160 columns wide, from
    /// `cwd`, its standard output written to `stdout`; `script`'s logs go
    /// to `dir`.
    pub fn start(program: &Path, args: &[&str], cwd: &Path, stdout: &Path, dir: &Path) -> Terminal {
        let pid_file = dir.join("terminal.pid");
        let mut line = format!(
            "stty cols 160 rows 40; echo $$ > {}; exec {}",
            quote(&pid_file.to_string_lossy()),
            quote(&program.to_string_lossy())
        );
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        line.push_str(&format!(" > {}", quote(&stdout.to_string_lossy())));
        let mut command = Command::new("script");
        // -q: no banner, -f: flush at once, -e: its exit status is the
        // command's, -c: the command; no typescript file.
        command.args(["-qfec", &line, "/dev/null"]).current_dir(cwd);
        let process = Process::spawn("terminal", &mut command, dir);
        Terminal { process, pid_file }
    }

    /// Everything the terminal showed so far, escape sequences included.
    pub fn screen(&self) -> String {
        self.process.stdout()
    }

    /// The command's process id, once it has started.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Sends SIGINT to the command, as Ctrl-C does; panics when it has not
    /// started.
    pub fn interrupt(&self) {
        process::interrupt(self.pid().expect("the command has started"));
    }
}

/// `text` as one shell word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
