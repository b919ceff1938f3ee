//! The daemon's own HTTP side: the router (`/metrics`, `/healthz`,
//! `/readyz`, `/-/reload`, `/`) and its exposure (TLS, basic auth).

pub mod exposure;
pub mod router;
