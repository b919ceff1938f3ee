pub fn fx() -> u8 {
    super::y::fy()
}
