use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let s = input.trim();
    let mut depth: i64 = 0;
    let mut best: i64 = 0;
    for c in s.chars() {
        if c == '(' {
            depth += 1;
        } else {
            depth -= 1;
        }
        if depth < 0 {
            println!("-1");
            return;
        }
        best = best.max(depth);
    }
    if depth != 0 {
        println!("-1");
    } else {
        println!("{}", best);
    }
}
