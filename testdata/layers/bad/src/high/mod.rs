pub fn top() -> u8 {
    crate::low::base()
}
