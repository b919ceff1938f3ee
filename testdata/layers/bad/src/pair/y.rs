use super::x;

pub fn fy() -> u8 {
    1
}

pub fn again() -> u8 {
    x::fx()
}
