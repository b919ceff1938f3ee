//! What this binary was built from, for `llmprobe --version` (and for
//! `llmprobe_build_info`, whose labels are the metrics' own contract).

/// The package version (Cargo.toml).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git revision of the shipped binary, "unknown" in other builds (see
/// build.rs).
pub const REVISION: &str = env!("LLMPROBE_BUILD_REVISION");

/// The version of the rustc that compiled it ("1.95.0").
pub const RUSTC_VERSION: &str = env!("LLMPROBE_BUILD_RUSTC");

/// `llmprobe --version`: "0.1.0 (revision 1a2b3c4d5e6f, rustc 1.95.0)".
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("LLMPROBE_BUILD_REVISION"),
    ", rustc ",
    env!("LLMPROBE_BUILD_RUSTC"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_line_names_version_revision_and_compiler() {
        assert_eq!(
            VERSION_LINE,
            format!("{VERSION} (revision {REVISION}, rustc {RUSTC_VERSION})")
        );
        assert!(!REVISION.is_empty());
        assert!(
            RUSTC_VERSION.split('.').count() >= 3,
            "rustc version {RUSTC_VERSION}"
        );
    }
}
