pub const VERSION: &str = "1";

pub fn top() -> u8 {
    crate::low::base()
}
