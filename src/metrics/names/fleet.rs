//! Target discovery and sharding (registered; see `metrics::fleet`).

use super::spec::Spec;

const FILE: &[&str] = &["file"];

/// Failed reads of a discovery file.
pub const FILE_SD_READ_ERRORS: Spec = Spec {
    name: "llmprobe_file_sd_read_errors_total",
    help: "Failed reads of a file_sd file (unreadable or unparsable); the file keeps the targets it gave last time.",
    labels: FILE,
};
/// Valid targets of a discovery file.
pub const FILE_SD_TARGETS: Spec = Spec {
    name: "llmprobe_file_sd_targets",
    help: "Valid targets a file_sd file gives (as of its last successful read).",
    labels: FILE,
};
/// Invalid entries of a discovery file.
pub const FILE_SD_INVALID: Spec = Spec {
    name: "llmprobe_file_sd_invalid_targets",
    help: "Entries of a file_sd file skipped as invalid at its last successful read (see the log or check-config).",
    labels: FILE,
};
/// Discovered targets not started, and why.
pub const FILE_SD_REFUSED: Spec = Spec {
    name: "llmprobe_file_sd_refused_targets",
    help: "Discovered targets this instance owns but did not start at the last look, by reason: max_prompt_memory_mib (their prompts and request bodies would take the daemon's prompt memory over the cap; see the log, POST /-/reload or check-config).",
    labels: &["reason"],
};
/// The `reason` of [`FILE_SD_REFUSED`]: the prompt memory cap.
pub const REFUSED_PROMPT_MEMORY: &str = "max_prompt_memory_mib";
/// Every known target and the shard that owns it.
pub const FLEET_TARGET: Spec = Spec {
    name: "llmprobe_fleet_target",
    help: "Every target this instance knows (static or from file_sd), owned or not; shard is the instance that should measure it. Always 1.",
    labels: &["target", "source", "shard"],
};
/// Targets this instance owns.
pub const SHARD_TARGETS: Spec = Spec {
    name: "llmprobe_shard_targets",
    help: "Targets owned, and so measured, by this instance.",
    labels: &["shard"],
};
/// This instance's shard.
pub const SHARD_INFO: Spec = Spec {
    name: "llmprobe_shard_info",
    help: "This instance's shard index and the shard count it was configured with. Always 1.",
    labels: &["index", "count"],
};
