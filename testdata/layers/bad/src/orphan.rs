// Declared by no mod: the compiler never reads it.
