use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let _n: usize = it.next().unwrap().parse().unwrap();
    let moves = it.next().unwrap();
    let (mut x, mut y) = (0i64, 0i64);
    for c in moves.chars() {
        match c {
            'U' => y += 1,
            'D' => y -= 1,
            'L' => x -= 1,
            'R' => x += 1,
            _ => {}
        }
    }
    println!("{} {} {}", x, y, x.abs() + y.abs());
}
