use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut s: Vec<i64> = (0..n).map(|_| it.next().unwrap()).collect();
    s.sort_unstable_by(|a, b| b.cmp(a));
    if n < 2 {
        println!("-1");
    } else {
        println!("{}", s[1]);
    }
}
