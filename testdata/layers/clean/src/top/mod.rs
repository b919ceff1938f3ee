use crate::base::{self, Part};

pub fn go() -> Part {
    base::make()
}

#[cfg(test)]
mod tests {
    // Test code may use anything; it is left out.
    use crate::top::go;
}
