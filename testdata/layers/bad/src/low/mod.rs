pub mod attr;
pub mod deep;

pub fn base() -> u8 {
    // A path only a macro's tokens hold.
    assert!(crate::pair::x::fx() > 0);
    1
}

// Test modules are left out, inline or in their own file.
#[cfg(test)]
mod tests {
    use crate::high::top;
}

#[cfg(test)]
mod more_tests;
