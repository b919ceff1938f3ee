//! llmprobe

pub mod chunk;
pub mod metrics;
pub mod report;
pub mod sample;
pub mod server;
pub mod sim;
pub mod sse;
