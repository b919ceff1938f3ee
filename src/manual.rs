//! Man pages and shell completions, generated from the clap definitions in
//! [`crate::cli`] so that they cannot drift from the binary they ship with.
//! The packages run the hidden `llmprobe generate-docs DIR` of the very binary
//! they install.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// Shells whose completion scripts are written, with the file name each
/// shell's completion loader looks for.
const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "llmprobe"),
    (Shell::Zsh, "_llmprobe"),
    (Shell::Fish, "llmprobe.fish"),
];

/// Writes `man1/llmprobe.1` (and one page per visible subcommand,
/// `llmprobe-run.1`...) and `completions/{llmprobe,_llmprobe,llmprobe.fish}`
/// under `out`; returns the files written, sorted.
pub fn generate(out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let man = out.join("man1");
    std::fs::create_dir_all(&man).with_context(|| format!("cannot create {}", man.display()))?;
    clap_mangen::generate_to(Cli::command(), &man)
        .with_context(|| format!("cannot write man pages into {}", man.display()))?;
    // clap knows the flags; what a host's operator also looks up (files,
    // signals, exit codes, examples) is appended as sections of its own.
    for (page, sections) in [
        ("llmprobe.1", MAIN_SECTIONS),
        ("llmprobe-sweep.1", SWEEP_SECTIONS),
    ] {
        let path = man.join(page);
        let mut text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        text.push_str(sections);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }

    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)
        .with_context(|| format!("cannot create {}", completions.display()))?;
    for (shell, file) in SHELLS {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut visible_command(), "llmprobe", &mut script);
        let path = completions.join(file);
        std::fs::write(&path, script)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }

    let mut written = Vec::new();
    for dir in [man, completions] {
        for entry in std::fs::read_dir(&dir)? {
            written.push(entry?.path());
        }
    }
    written.sort();
    Ok(written)
}

/// The sections of `llmprobe(1)` that clap does not make, in roff.
const MAIN_SECTIONS: &str = r#".SH CONFIGURATION
One YAML file; unknown keys are errors, every problem is reported at once
naming the file and the key, and any key can be overridden from the
environment (\fBLLMPROBE__SCHEDULE__INTERVAL=5m\fR). Its sections:
.TP
\fBlisten\fR, \fBweb\fR
where /metrics, /healthz, /readyz, / and /targets/NAME are served; basic
auth, TLS, whether POST /\-/reload is enabled.
.TP
\fBschedule\fR
interval and jitter between two sweeps of a target, the cap on requests in
flight across all targets, the sweep time limit.
.TP
\fBdefaults\fR
what every target inherits: workload, levels, requests per level, SLO,
headroom, idle gate, probes between sweeps, the sustained\-rate search.
.TP
\fBworkloads\fR
the fixed variables: prompts (inline, a file or a folder), output tokens,
temperature.
.TP
\fBtargets\fR
the servers: base_url (or a built\-in simulator), model, api_key_env or
api_key_file, labels, workloads, any default overridden.
.TP
\fBfile_sd\fR, \fBtarget_template\fR, \fBshard\fR
targets discovered from Prometheus file_sd files, and which instance of a
sharded fleet sweeps which.
.TP
\fBgateway_pairs\fR
a gateway's own overhead: a stub engine measured directly and through it.
.TP
\fBsinks\fR
where results go besides /metrics: log lines, OTLP.
.TP
\fBstate_dir\fR
what each target's loop learnt, kept across restarts.
.PP
Every key: /usr/share/llmprobe/examples/example.yaml and
/usr/share/doc/llmprobe/configuration.md.
.SH FILES
.TP
\fB/etc/llmprobe/llmprobe.yaml\fR
the configuration read when neither \fB\-\-config\fR nor
\fBLLMPROBE_CONFIG\fR names one and the current folder has no
\fBconfig/llmprobe.yaml\fR (a checkout, which comes first).
.TP
\fB/etc/default/llmprobe\fR
the targets' keys and other environment, read by the unit's
EnvironmentFile= and by \fB\-\-env\-file\fR; mode 0600.
.TP
\fB/var/lib/llmprobe/\fR
the state directory: \fBtarget\-*.json\fR, what each target's loop learnt;
\fBtarget\-*.lock\fR, held by the daemon while it sweeps the target.
.TP
\fB/usr/lib/systemd/system/llmprobe.service\fR
the unit.
.TP
\fB/usr/share/llmprobe/\fR
the Prometheus scrape job and alert rules, the Grafana dashboards, the
commented example configuration with its prompts.
.TP
\fB/usr/share/doc/llmprobe/\fR
the documentation; runbook.md says what to do about each alert.
.SH ENVIRONMENT
.TP
\fBLLMPROBE_CONFIG\fR
the configuration file, when \fB\-\-config\fR names none.
.TP
\fBLLMPROBE__\fIKEY\fR__\fISUBKEY\fR
overrides a configuration key.
.TP
\fBSTATE_DIRECTORY\fR, \fBCREDENTIALS_DIRECTORY\fR
set by systemd: the default state_dir, and where api_key_file's credentials are.
.TP
\fBRUST_LOG\fR
the log level (default info; warn for the one\-shot commands).
.TP
\fBHTTPS_PROXY\fR, \fBHTTP_PROXY\fR, \fBNO_PROXY\fR
the proxies of targets whose proxy setting is environment.
.SH SIGNALS
.TP
\fBSIGHUP\fR
the daemon reads its configuration again; a rejected one is logged and the
running one kept (llmprobe_config_last_reload_successful).
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
the daemon cancels the requests in flight and exits within about 12 s.
.SH EXIT STATUS
.TP
\fB0\fR
success.
.TP
\fB1\fR
a configuration error (or no configuration file found), or another failure.
.TP
\fB2\fR
\fBsweep\fR: a sweep or a gateway pair failed.
.TP
\fB3\fR
\fBsweep\fR: a setup mistake (key, model, URL, TLS, DNS) stopped a sweep;
\fBcheck\-config \-\-online\fR: a target is not ready.
.TP
\fB4\fR
\fBsweep\fR: a daemon is sweeping a selected target now; nothing was swept.
.SH EXAMPLES
.TP
\fBllmprobe check\-config \-\-env\-file /etc/default/llmprobe\fR
validate /etc/llmprobe/llmprobe.yaml with the unit's keys, and explain it.
.TP
\fBllmprobe sweep \-\-env\-file /etc/default/llmprobe \-\-target worker\-1\fR
sweep one target now, beside the daemon.
.TP
\fBllmprobe sweep \-\-format html \-\-output report.html\fR
the same as an HTML report.
.TP
\fBsystemctl reload llmprobe\fR
check the edited configuration, then apply it (SIGHUP).
.TP
\fBllmprobe simulate \-\-listen 127.0.0.1:8000 \-\-profile small\-gpu\fR
a simulated engine to try a configuration against.
"#;

/// The sections of `llmprobe-sweep(1)` that clap does not make, in roff.
const SWEEP_SECTIONS: &str = r#".SH EXIT STATUS
.TP
\fB0\fR
every sweep completed.
.TP
\fB1\fR
a configuration error, no configuration file found, or an unknown target.
.TP
\fB2\fR
a sweep or a gateway pair failed (unreachable, time limit).
.TP
\fB3\fR
a setup mistake stopped a sweep: a line per target on standard error says
what to change.
.TP
\fB4\fR
a daemon with the same state_dir is sweeping a selected target now (it holds
the target's lock file there); nothing was swept. \fB\-\-force\fR sweeps anyway.
.SH BESIDE THE DAEMON
Each target waits for its idle gate, as the daemon's sweeps do. The targets'
lock files are held until the sweep ends, so the daemon's next sweep of them
waits. \fB\-\-force\fR skips the gate and the locks.
.SH EXAMPLES
.TP
\fBllmprobe sweep \-\-env\-file /etc/default/llmprobe\fR
every target of /etc/llmprobe/llmprobe.yaml, with the unit's keys.
.TP
\fBllmprobe sweep \-\-target worker\-1 \-\-format json \-\-output worker\-1.json\fR
one target, as a JSON document (\fBllmprobe report worker\-1.json\fR renders it).
.TP
\fBllmprobe sweep \-\-state /var/lib/llmprobe\fR
start from the daemon's saved evidence (read only).
"#;

/// The command line without its hidden subcommands: clap_complete lists
/// hidden subcommands (clap_mangen skips them), and clap cannot remove one.
fn visible_command() -> clap::Command {
    let full = Cli::command();
    // Only the flags matter to a completion script; -V comes with a version.
    let mut cmd = clap::Command::new("llmprobe").version(crate::build_info::VERSION_LINE);
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    for arg in full.get_arguments() {
        cmd = cmd.arg(arg.clone());
    }
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(sub.clone());
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_page_per_visible_subcommand_and_three_completion_scripts() {
        let dir = std::env::temp_dir().join(format!("llmprobe-manual-{}", std::process::id()));
        let files = generate(&dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "completions/_llmprobe",
                "completions/llmprobe",
                "completions/llmprobe.fish",
                "man1/llmprobe-check-config.1",
                "man1/llmprobe-report.1",
                "man1/llmprobe-run.1",
                "man1/llmprobe-simulate.1",
                "man1/llmprobe-sweep.1",
                "man1/llmprobe.1",
            ]
        );
        let page = std::fs::read_to_string(dir.join("man1/llmprobe.1")).unwrap();
        assert!(
            page.starts_with(".ie \\n(.g .ds Aq"),
            "not roff: {page:.80}"
        );
        assert!(page.contains("check\\-config"), "no subcommand list");
        assert!(
            !page.contains("generate\\-docs"),
            "hidden subcommand listed"
        );
        for section in [
            ".SH FILES",
            ".SH SIGNALS",
            ".SH EXIT STATUS",
            ".SH EXAMPLES",
            ".SH CONFIGURATION",
        ] {
            assert!(page.contains(section), "no {section}");
        }
        let sweep = std::fs::read_to_string(dir.join("man1/llmprobe-sweep.1")).unwrap();
        assert!(sweep.contains(".SH EXIT STATUS"), "{sweep}");
        assert!(sweep.contains("\\fB4\\fR"), "{sweep}");
        let bash = std::fs::read_to_string(dir.join("completions/llmprobe")).unwrap();
        assert!(bash.contains("complete -F _llmprobe"), "{bash:.200}");
        assert!(
            !bash.contains("generate-docs"),
            "hidden subcommand completed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
