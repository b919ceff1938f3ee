//! nginx as a foreground, unprivileged reverse proxy on a loopback port
//! (Debian package `nginx`; a test that needs it fails, saying so, when it
//! is missing).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::paths::ScratchDir;
use super::ports::free_port;
use super::process::Process;
use super::wait;

/// The nginx binary: on PATH, or where Debian puts it (`/usr/sbin` is not on
/// an unprivileged user's PATH).
pub fn binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|dir| dir.join("nginx"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx not found (looked on PATH, in /usr/sbin and /usr/local/sbin): this test needs \
                 a real reverse proxy; install Debian's `nginx` package (scripts/test does)"
            )
        })
}

/// A running nginx; stopped (SIGTERM, so that the master stops its worker)
/// when dropped, even on panic.
pub struct Nginx {
    /// Where it listens.
    pub addr: SocketAddr,
    // Dropped before the directory it runs in.
    process: Process,
    dir: ScratchDir,
}

/// One worker, a keep-alive upstream, no buffering: a gateway set up the way
/// one in front of a streaming LLM server should be.
fn conf(dir: &Path, port: u16, upstream: SocketAddr) -> String {
    let d = dir.display();
    format!(
        r#"
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream stub {{
        server {upstream};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://stub;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"#
    )
}

impl Nginx {
    /// Starts nginx reverse-proxying to `upstream` on a free loopback port.
    pub fn start(upstream: SocketAddr) -> Nginx {
        let binary = binary();
        let dir = ScratchDir::new("nginx");
        // The port is free when chosen but could be taken before nginx binds
        // it: a few tries make that race harmless.
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let conf_file = dir.join("nginx.conf");
            std::fs::write(&conf_file, conf(dir.path(), port, upstream)).unwrap();
            let process = Process::spawn(
                "nginx",
                Command::new(&binary)
                    .arg("-p")
                    .arg(dir.path())
                    .arg("-e")
                    .arg(dir.join("error.log"))
                    .arg("-c")
                    .arg(&conf_file)
                    .args(["-g", "daemon off;"]),
                dir.path(),
            );
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let listening = wait::poll_blocking(
                &format!("nginx to listen on {addr}"),
                Duration::from_secs(10),
                || {
                    if let Some(status) = process.exited() {
                        return Ok(Err(status));
                    }
                    match std::net::TcpStream::connect(addr) {
                        Ok(_) => Ok(Ok(())),
                        Err(e) => Err(e.to_string()),
                    }
                },
            );
            match listening {
                Ok(()) => return Nginx { addr, process, dir },
                Err(status) => {
                    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                    last_error = format!("nginx exited with {status}: {}{log}", process.tail());
                }
            }
        }
        panic!("nginx could not start: {last_error}");
    }
}
