use std::collections::VecDeque;
use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let r: usize = it.next().unwrap().parse().unwrap();
    let c: usize = it.next().unwrap().parse().unwrap();
    let grid: Vec<&[u8]> = (0..r).map(|_| it.next().unwrap().as_bytes()).collect();
    let mut seen = vec![vec![false; c]; r];
    let mut islands = 0;
    for i in 0..r {
        for j in 0..c {
            if grid[i][j] != b'#' || seen[i][j] {
                continue;
            }
            islands += 1;
            seen[i][j] = true;
            let mut queue = VecDeque::new();
            queue.push_back((i, j));
            while let Some((a, b)) = queue.pop_front() {
                let mut next = Vec::with_capacity(4);
                if a > 0 { next.push((a - 1, b)); }
                if a + 1 < r { next.push((a + 1, b)); }
                if b > 0 { next.push((a, b - 1)); }
                if b + 1 < c { next.push((a, b + 1)); }
                for (x, y) in next {
                    if grid[x][y] == b'#' && !seen[x][y] {
                        seen[x][y] = true;
                        queue.push_back((x, y));
                    }
                }
            }
        }
    }
    println!("{}", islands);
}
