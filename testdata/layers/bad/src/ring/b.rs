pub fn fb() -> u8 {
    crate::ring::c::fc()
}
