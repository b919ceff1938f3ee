//! The faces: what a person reads of the reports. `text` (the tables and
//! the phrases the terminal and the HTML page share), `html` (the report
//! page).

pub mod html;
pub mod text;
