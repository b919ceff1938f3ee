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
///
/// The file is opened first and its handle checked, never the path checked
/// and then opened: a FIFO swapped in between would block the read. The
/// open does not wait for a FIFO's writer (`O_NONBLOCK`, which changes
/// nothing for a regular file).
pub fn read_limited(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// `path` opened for reading, when the handle is a regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Neither wait for a FIFO's writer nor take a terminal as the
        // controlling one.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", kind_of(&kind)),
        ));
    }
    Ok(file)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A FIFO with no writer: the read is refused at once, whether the path
    /// was a FIFO from the start or became one (the handle is what is
    /// checked). Run on a thread so that a read that blocks fails the test
    /// instead of hanging it.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = std::env::temp_dir().join(format!("llmprobe-env-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("key");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path and nothing else.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_limited(&path, 100).map_err(|e| e.to_string()));
        });
        let got = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the read of a FIFO did not return within 5 s");
        let e = got.unwrap_err();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        let e = read_limited(&dir, 100).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        std::fs::write(dir.join("ok"), "sk-1234").unwrap();
        assert_eq!(
            read_limited(&dir.join("ok"), 100).unwrap(),
            Some(b"sk-1234".to_vec())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
