//! The daemon's own HTTP side: the router (`/metrics`, `/healthz`,
//! `/readyz`, `/-/reload`, `/`), its exposure (TLS, basic auth), serving it
//! on the listener, and the connection loop that bounds what clients hold;
//! password checks admitted fairly, reloads spaced, refusals logged at a
//! bounded rate.

pub mod admission;
pub mod connections;
pub mod credentials;
pub mod exposure;
pub mod reloads;
pub mod router;
pub mod serve;
pub mod tally;
