mod a;
mod b;
mod c;
