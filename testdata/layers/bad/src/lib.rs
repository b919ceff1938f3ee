pub mod extra;
pub mod high;
pub mod low;
pub mod pair;
pub mod ring;
