use std::io::{self, Read, Write};

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<u64>().unwrap());
    let q = it.next().unwrap() as usize;
    let mut out = String::new();
    for _ in 0..q {
        let a = it.next().unwrap();
        let b = it.next().unwrap();
        out.push_str(&format!("{}\n", gcd(a, b)));
    }
    io::stdout().write_all(out.as_bytes()).unwrap();
}
