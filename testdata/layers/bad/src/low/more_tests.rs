use crate::high::top;
