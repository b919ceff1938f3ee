//! The pipeline's entry: the YAML plus `LLMPROBE__` environment overrides
//! read and decoded strictly ([`super::file`]), then resolved
//! ([`super::resolve`]); errors name the file and the key.

use std::path::Path;

use super::env::{overrides, read_limited, ProcessEnv};
use super::error::ConfigError;
use super::file::FileConfig;
use super::resolve::resolve_with;
use super::resolved::Config;
use super::tls::Checks;

/// Reads, decodes and validates the configuration at `path`, with
/// `LLMPROBE__` overrides from the process environment (the TLS files are
/// not read: see [`load_with`]).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, &Checks::NONE)
}

/// [`load`], running `checks` too.
pub fn load_with(path: &Path, checks: &Checks) -> Result<Config, ConfigError> {
    let file = decode(path, true)?;
    resolve_with(path, file, &ProcessEnv, checks)
}

/// Largest configuration file read: a file with a thousand targets is a
/// few hundred KB; anything near this is not a configuration.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Deepest nesting accepted in the file (the schema needs 5).
const MAX_DEPTH: usize = 64;

/// Decodes the file (and, when `with_env`, `LLMPROBE__*` variables) strictly.
pub fn decode(path: &Path, with_env: bool) -> Result<FileConfig, ConfigError> {
    let shown = path.display().to_string();
    let fail = |msg: String| ConfigError {
        problems: vec![format!("{shown}: {msg}")],
    };
    let text = read_config(path).map_err(fail)?;
    decode_text(&text, &shown, with_env)
}

/// Decodes `text`, the configuration `shown` names in messages.
pub fn decode_text(text: &str, shown: &str, with_env: bool) -> Result<FileConfig, ConfigError> {
    let fail = |msg: String| ConfigError {
        problems: vec![format!("{shown}: {msg}")],
    };
    refuse_aliases(text).map_err(fail)?;
    let mut builder = ::config::Config::builder()
        .add_source(::config::File::from_str(text, ::config::FileFormat::Yaml));
    if with_env {
        builder = builder.add_source(overrides());
    }
    let raw = builder.build().map_err(|e| match e {
        // Read from text, the crate does not know the file: say it, as it
        // would have.
        ::config::ConfigError::FileParse { cause, .. } => fail(format!("{cause} in {shown}")),
        e => fail(e.to_string()),
    })?;
    serde_path_to_error::deserialize::<_, FileConfig>(raw).map_err(|e| {
        let key = e.path().to_string();
        let mut inner = e.into_inner().to_string();
        // The config crate appends the key itself; it is already in front.
        if let Some(at) = inner.find(" for key `") {
            inner.truncate(at);
        }
        if key == "." || key.is_empty() {
            fail(inner)
        } else {
            fail(format!("{key}: {inner}"))
        }
    })
}

/// The file's text, read within [`MAX_CONFIG_BYTES`]; the message says
/// what the path really is (missing, a link loop, a device, too large).
fn read_config(path: &Path) -> Result<String, String> {
    match read_limited(path, MAX_CONFIG_BYTES) {
        Ok(Some(bytes)) => String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string()),
        Ok(None) => Err(format!(
            "is larger than {} MiB: not a configuration",
            MAX_CONFIG_BYTES >> 20
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err("file not found".into()),
        Err(e) => Err(format!("cannot read: {e}")),
    }
}

/// Refuses YAML aliases (`*name`) and deep nesting before the YAML loader
/// sees the text: the loader copies every alias, so 600 bytes of nested
/// aliases ("billion laughs") grew to 3.9 GB and a reload killed the daemon.
/// A syntax error is left to the loader, which words it.
fn refuse_aliases(text: &str) -> Result<(), String> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let Ok((event, mark)) = parser.next_token() else {
            return Ok(());
        };
        match event {
            Event::StreamEnd => return Ok(()),
            Event::Alias(_) => {
                return Err(format!(
                    "line {}: YAML aliases (`*name`) are not accepted: write the value out",
                    mark.line()
                ))
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "line {}: nested deeper than {MAX_DEPTH} levels",
                        mark.line()
                    ));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> String {
        decode_text(text, "c.yaml", false)
            .unwrap_err()
            .problems
            .join("\n")
    }

    #[test]
    fn aliases_are_refused_before_they_expand() {
        let mut laughs = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (i, name) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
            let prev = ["a", "b", "c", "d", "e", "f", "g", "h"][i];
            laughs.push_str(&format!(
                "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        assert_eq!(
            problem(&laughs),
            "c.yaml: line 2: YAML aliases (`*name`) are not accepted: write the value out"
        );
        let anchors_only = "listen: &l \"127.0.0.1:1\"\n";
        assert!(decode_text(anchors_only, "c.yaml", false).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("a: {}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(
            problem(&deep),
            "c.yaml: line 1: nested deeper than 64 levels"
        );
    }

    #[test]
    fn what_the_path_is_is_said_truly() {
        let dir = std::env::temp_dir().join(format!("llmprobe-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let looped = dir.join("loop.yaml");
        let _ = std::fs::remove_file(&looped);
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let e = decode(&looped, false).unwrap_err().problems.join("");
        assert!(
            e.ends_with("loop.yaml: cannot read: Too many levels of symbolic links (os error 40)"),
            "{e}"
        );
        let e = decode(Path::new("/dev/zero"), false)
            .unwrap_err()
            .problems
            .join("");
        assert_eq!(
            e,
            "/dev/zero: cannot read: not a regular file (a character device)"
        );
        let e = decode(&dir, false).unwrap_err().problems.join("");
        assert!(
            e.ends_with("cannot read: not a regular file (a directory)"),
            "{e}"
        );
        let e = decode(&dir.join("absent.yaml"), false)
            .unwrap_err()
            .problems
            .join("");
        assert!(e.ends_with("absent.yaml: file not found"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
