//! Loopback ports for servers that must be told their port before they start.

use std::net::TcpListener;

/// A loopback port nobody listens on right now. Another process could take
/// it before the caller binds it; the runners that use it say so when their
/// server cannot listen.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An OpenAI base URL on a loopback port where nothing listens: connecting
/// is refused.
pub fn refusing_base_url() -> String {
    format!("http://127.0.0.1:{}/v1", free_port())
}
