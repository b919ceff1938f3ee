// Not a test module: only `#[cfg(test)] mod` is left out, and the code after
// it is read.
#[cfg(test)]
fn helper() {}

pub fn deep() -> u8 {
    crate::high::top()
}
