//! Prints the error of the README's forgotten-axis example.
use gather::prelude::*;
use ndarray::{Array3, array};

fn main() {
    let patches = Array3::<f32>::zeros((2, 5, 3));
    let keep = array![[4i64, 1], [0, 3]];
    match patches.gather(1, &keep) {
        Ok(_) => println!("unexpectedly ok"),
        Err(e) => println!("{e}"),
    }
}
