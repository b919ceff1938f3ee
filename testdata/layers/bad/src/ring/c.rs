use self::super::a as first;

pub fn fc() -> u8 {
    first::fa()
}
