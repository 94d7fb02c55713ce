//! The `gather` command.

fn main() {
    println!("gather");
}
