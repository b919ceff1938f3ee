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
        let bash = std::fs::read_to_string(dir.join("completions/llmprobe")).unwrap();
        assert!(bash.contains("complete -F _llmprobe"), "{bash:.200}");
        assert!(
            !bash.contains("generate-docs"),
            "hidden subcommand completed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
