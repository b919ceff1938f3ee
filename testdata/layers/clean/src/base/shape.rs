pub struct Shape;
