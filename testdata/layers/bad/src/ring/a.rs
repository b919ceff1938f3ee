use super::{b::{fb}};

pub fn fa() -> u8 {
    fb()
}
