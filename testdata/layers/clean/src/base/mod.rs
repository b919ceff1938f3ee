//! Re-exports its children's items; a child using one through `super::` uses
//! the child that defines it, not this file.

mod parts;
mod shape;
mod user;

pub use parts::Part;
pub use shape::*;
pub use user::make;
