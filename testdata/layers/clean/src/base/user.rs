use super::{Part, Shape};

pub fn make() -> Part {
    Part(Shape)
}
