//! llmprobe: keeps measuring the serving capacity of OpenAI-compatible LLM
//! servers and exposes what it measured to Prometheus.

pub mod report;
pub mod sample;
pub mod sim;
