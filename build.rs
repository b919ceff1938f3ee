//! Build script: the revision and compiler that `llmprobe --version` names
//! (`llmprobe::build_info`).
//!
//! The revision comes from `LLMPROBE_GIT_REVISION`, which
//! packaging/dist-binary sets for the shipped binary; other builds say
//! "unknown". Asking git here instead would rebuild the whole package after
//! every commit.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LLMPROBE_GIT_REVISION");
    let revision = std::env::var("LLMPROBE_GIT_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!(
        "cargo:rustc-env=LLMPROBE_BUILD_REVISION={}",
        revision.trim()
    );

    // "rustc 1.95.0 (59807616e 2026-04-14)" -> "1.95.0"
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LLMPROBE_BUILD_RUSTC={version}");
}
