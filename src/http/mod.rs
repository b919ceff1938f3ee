//! The daemon's own HTTP side: the router (`/metrics`, `/healthz`,
//! `/readyz`, `/-/reload`, `/`), its exposure (TLS, basic auth), serving it
//! on the listener, and the connection loop that bounds what clients hold.

pub mod connections;
pub mod exposure;
pub mod router;
pub mod serve;
