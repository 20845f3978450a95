use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let _n: usize = it.next().unwrap().parse().unwrap();
    let s = it.next().unwrap().as_bytes();
    let mut best = 1;
    let mut run = 1;
    for i in 1..s.len() {
        if s[i] == s[i - 1] {
            run += 1;
        } else {
            run = 1;
        }
        if run > best {
            best = run;
        }
    }
    println!("{}", best);
}
