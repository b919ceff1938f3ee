use super::shape::Shape;

pub struct Part(pub Shape);
