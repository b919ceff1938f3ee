//! Talking to a target: the HTTP client (the only user of reqwest), the
//! clients per TLS setting, the endpoint kinds (one file each in [`api`]),
//! the request bodies of a workload, one timed exchange, what a server
//! tells about its own setup, and its own Prometheus metrics (one reader of
//! the text format, the engines' names).

pub mod api;
pub mod body;
pub mod client;
pub mod engine_metrics;
pub mod exchange;
pub mod exposition;
pub mod setup;
pub mod tls;
