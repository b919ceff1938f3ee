//! What config reads from outside the file: environment variables (the
//! `LLMPROBE__` overrides, `api_key_env`, `${CREDENTIALS_DIRECTORY}`) and
//! bounded file reads (API key files, prompt files). A leaf: it imports no
//! other part of config.

use std::path::Path;

/// Source of environment variables, so tests need not touch the process's.
pub trait Env {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// The `LLMPROBE__` overrides of the file's keys, `__` between levels
/// (`LLMPROBE__SCHEDULE__INTERVAL=5m`), read from the process environment.
pub fn overrides() -> ::config::Environment {
    ::config::Environment::with_prefix("LLMPROBE")
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true)
}

/// Largest API key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// The API key in the file at `written` (a leading `${CREDENTIALS_DIRECTORY}`
/// expanded), trimmed; the message names the file but never quotes it: the
/// content is the secret.
pub fn read_key_file(written: &str, env: &dyn Env) -> Result<String, String> {
    let expanded = expand_credentials_dir(written, env);
    match read_limited(Path::new(&expanded), MAX_KEY_FILE_BYTES).map(|b| b.map(String::from_utf8)) {
        Ok(Some(Ok(v))) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        Ok(Some(Ok(_))) => Err(format!("`{expanded}` is empty")),
        Ok(Some(Err(_))) => Err(format!("`{expanded}` is not UTF-8 text")),
        Ok(None) => Err(format!(
            "`{expanded}` is larger than {MAX_KEY_FILE_BYTES} bytes"
        )),
        Err(e) => Err(format!("cannot read `{expanded}`: {e}")),
    }
}

/// Expands a leading `${CREDENTIALS_DIRECTORY}` (systemd's `LoadCredential=`).
fn expand_credentials_dir(path: &str, env: &dyn Env) -> String {
    match path.strip_prefix("${CREDENTIALS_DIRECTORY}") {
        Some(rest) => format!(
            "{}{rest}",
            env.var("CREDENTIALS_DIRECTORY").unwrap_or_default()
        ),
        None => path.to_string(),
    }
}

/// The whole file, or None when it holds more than `limit` bytes. Only a
/// regular file (or a link to one) is read: a FIFO would block the reader
/// until someone writes, and a device such as `/dev/zero` has no end; the
/// error says which it is. A link loop fails with the system's own words.
pub fn read_limited(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let kind = std::fs::metadata(path)?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", kind_of(&kind)),
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// What a file that is not a regular one is, in words.
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}
