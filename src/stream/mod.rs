//! The OpenAI stream, without I/O: SSE framing and chat-completion chunk
//! interpretation. Pure: bytes in, events out.

pub mod chunk;
pub mod sse;
