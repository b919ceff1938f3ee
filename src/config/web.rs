//! Validation of `web:`: the users' password hashes and the TLS files of
//! the HTTP endpoints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checks::check_password_hashes;
use super::file::WebFile;
use super::resolved::Web;
use super::secret::Secret;
use super::tls::{Checks, TlsFiles};

/// Resolves `web:`: the users' hashes checked, the TLS files located
/// (relative to the config) and checked by `checks`.
pub fn resolve_web(
    file: &WebFile,
    base_dir: &Path,
    checks: &Checks,
    bad: &mut dyn FnMut(&str, String),
) -> Web {
    let basic_auth_users = match check_password_hashes(&file.basic_auth_users) {
        Ok(()) => file
            .basic_auth_users
            .iter()
            .map(|(user, hash)| (user.clone(), Secret::new(hash.clone())))
            .collect(),
        Err(e) => {
            bad("web.basic_auth_users", e);
            BTreeMap::new()
        }
    };
    let rel = |p: &PathBuf| {
        if p.is_relative() {
            base_dir.join(p)
        } else {
            p.clone()
        }
    };
    let tls = match (&file.tls_cert_file, &file.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let files = TlsFiles {
                cert_file: rel(cert),
                key_file: rel(key),
            };
            match (checks.tls)(&files.cert_file, &files.key_file) {
                Ok(()) => Some(files),
                Err(e) => {
                    bad("web.tls_cert_file", e);
                    None
                }
            }
        }
        _ => {
            bad(
                "web",
                "set both `tls_cert_file` and `tls_key_file`, or neither".into(),
            );
            None
        }
    };
    Web {
        enable_reload: file.enable_reload,
        basic_auth_users,
        tls,
    }
}
