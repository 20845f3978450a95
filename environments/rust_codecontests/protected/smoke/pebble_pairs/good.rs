use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<u64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut even: u64 = 0;
    for _ in 0..n {
        if it.next().unwrap() % 2 == 0 {
            even += 1;
        }
    }
    let odd = n as u64 - even;
    let pairs = even * even.saturating_sub(1) / 2 + odd * odd.saturating_sub(1) / 2;
    println!("{}", pairs);
}
