// An upward use only an attribute's tokens hold, as clap's
// `#[command(version = ...)]` does.
#[command(version = crate::high::VERSION)]
pub struct Args;
