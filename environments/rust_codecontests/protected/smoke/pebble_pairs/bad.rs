use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let n: usize = it.next().unwrap().parse().unwrap();
    let a: Vec<u64> = (0..n).map(|_| it.next().unwrap().parse().unwrap()).collect();
    let even = a.iter().filter(|&&x| x % 2 == 0).count();
    let odd: u64 = n - even;
    let pairs = even * (even - 1) / 2 + odd * (odd - 1) / 2;
    println!("{}", pairs);
}
