//! Where the configuration is read from when neither `--config` nor
//! `$LLMPROBE_CONFIG` names a file: `config/llmprobe.yaml` in the current
//! folder (a checkout: `cargo run --release` measures the built-in engine),
//! else `/etc/llmprobe/llmprobe.yaml` (the package's). The first that exists
//! wins; a checkout's file comes first so that a developer's run never
//! reads the host's production configuration by surprise.

use std::path::{Path, PathBuf};

/// The checkout's configuration, relative to the current folder.
pub const CHECKOUT_PATH: &str = "config/llmprobe.yaml";

/// The installed configuration (the Debian package's conffile).
pub const SYSTEM_PATH: &str = "/etc/llmprobe/llmprobe.yaml";

/// The files looked for, in order, when none is named.
pub const SEARCH_ORDER: [&str; 2] = [CHECKOUT_PATH, SYSTEM_PATH];

/// The configuration file to read: `given` (from `--config` or
/// `$LLMPROBE_CONFIG`) as it is, even when missing (loading then says so),
/// else the first of [`SEARCH_ORDER`] for which `exists` holds. An error
/// names every file looked for.
pub fn find(given: Option<PathBuf>, exists: impl Fn(&Path) -> bool) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path);
    }
    SEARCH_ORDER
        .iter()
        .map(Path::new)
        .find(|p| exists(p))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "no configuration file: neither {CHECKOUT_PATH} (in the current folder) nor \
                 {SYSTEM_PATH} exists; name one with --config PATH or $LLMPROBE_CONFIG"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(given: Option<&str>, present: &[&str]) -> Result<PathBuf, String> {
        find(given.map(PathBuf::from), |p| {
            present.iter().any(|q| Path::new(q) == p)
        })
    }

    #[test]
    fn a_named_file_wins_even_when_missing() {
        let all = [CHECKOUT_PATH, SYSTEM_PATH];
        assert_eq!(found(Some("my.yaml"), &all), Ok("my.yaml".into()));
        assert_eq!(found(Some("missing.yaml"), &[]), Ok("missing.yaml".into()));
    }

    #[test]
    fn the_checkout_comes_before_the_system_file() {
        let all = [CHECKOUT_PATH, SYSTEM_PATH];
        assert_eq!(found(None, &all), Ok(CHECKOUT_PATH.into()));
        assert_eq!(found(None, &[SYSTEM_PATH]), Ok(SYSTEM_PATH.into()));
        assert_eq!(found(None, &[CHECKOUT_PATH]), Ok(CHECKOUT_PATH.into()));
    }

    #[test]
    fn none_found_names_every_file_looked_for() {
        let e = found(None, &[]).unwrap_err();
        assert!(e.contains(CHECKOUT_PATH) && e.contains(SYSTEM_PATH), "{e}");
        assert!(
            e.contains("--config") && e.contains("LLMPROBE_CONFIG"),
            "{e}"
        );
    }
}
