use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let _n: usize = it.next().unwrap().parse().unwrap();
    let s = it.next().unwrap();
    // longest run of ones
    let mut best = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '1' {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    println!("{}", best);
}
