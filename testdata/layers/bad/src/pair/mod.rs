pub mod x;
pub mod y;
