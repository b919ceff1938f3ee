pub mod base;
pub mod top;
