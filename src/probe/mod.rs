//! Talking to a target: the HTTP client (the only user of reqwest), the
//! clients per TLS setting, the endpoint kinds (one file each in [`api`]),
//! the request bodies of a workload, one timed exchange, and what a server
//! tells about its own setup.

pub mod api;
pub mod body;
pub mod client;
pub mod exchange;
pub mod setup;
pub mod tls;
