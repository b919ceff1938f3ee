//! A private PKI for HTTPS tests, made with `openssl`: a CA, a server
//! certificate for 127.0.0.1 and a client certificate it signed, and a
//! second CA that signed nothing of them; and the server TLS configurations
//! (with or without a required client certificate) built from them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::paths;

/// The files of a private PKI, in a fresh directory.
pub struct Pki {
    /// Where the files are.
    pub dir: PathBuf,
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// Another CA, which signed neither.
    pub other_ca: PathBuf,
    /// Server certificate (127.0.0.1, localhost) and its key.
    pub server_cert: PathBuf,
    /// Key of `server_cert`.
    pub server_key: PathBuf,
    /// Client certificate and its key.
    pub client_cert: PathBuf,
    /// Key of `client_cert`.
    pub client_key: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl is needed to make test certificates (Debian package `openssl`)");
    assert!(status.success(), "openssl {args:?} failed");
}

/// A self-signed CA `NAME.pem` with its key `NAME.key`.
fn ca(dir: &Path, name: &str) {
    let (key, pem, subj) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN={name}"),
    );
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &subj,
            "-keyout",
            &key,
            "-out",
            &pem,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        dir,
    );
}

/// A leaf `NAME.pem` / `NAME.key` signed by `ca`, with extensions `ext`.
fn leaf(dir: &Path, ca: &str, name: &str, ext: &str) {
    let (key, csr, pem, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&extfile), ext).unwrap();
    openssl(
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
        dir,
    );
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &extfile,
            "-out",
            &pem,
        ],
        dir,
    );
}

impl Pki {
    /// Makes every file.
    pub fn new() -> Pki {
        let dir = paths::fresh_dir("pki");
        ca(&dir, "ca");
        ca(&dir, "other-ca");
        leaf(
            &dir,
            "ca",
            "server",
            "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        );
        leaf(
            &dir,
            "ca",
            "client",
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        );
        Pki {
            ca: dir.join("ca.pem"),
            other_ca: dir.join("other-ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            dir,
        }
    }

    /// The server's configuration; with `require_client_cert`, only clients
    /// with a certificate from the CA get through the handshake.
    pub fn server_config(&self, require_client_cert: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.server_cert)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.server_key).unwrap();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(&self.ca).unwrap() {
                roots.add(c.unwrap()).unwrap();
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(builder.with_single_cert(certs, key).unwrap())
    }
}
