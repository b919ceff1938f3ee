//! The daemon's own HTTP side: the router (`/metrics`, `/healthz`,
//! `/readyz`, `/-/reload`, `/`), its exposure (TLS, basic auth), and
//! serving it on the listener.

pub mod exposure;
pub mod router;
pub mod serve;
