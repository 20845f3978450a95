use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let s: Vec<i64> = (0..n).map(|_| it.next().unwrap()).collect();
    let best = *s.iter().max().unwrap();
    let second = s.iter().filter(|&&x| x < best).max();
    match second {
        Some(v) => println!("{}", v),
        None => println!("-1"),
    }
}
