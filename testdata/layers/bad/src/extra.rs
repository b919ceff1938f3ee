pub fn extra() {}
