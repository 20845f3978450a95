use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let r: usize = it.next().unwrap().parse().unwrap();
    let c: usize = it.next().unwrap().parse().unwrap();
    let grid: Vec<Vec<u8>> = (0..r).map(|_| it.next().unwrap().as_bytes().to_vec()).collect();
    let mut seen = vec![vec![false; c]; r];
    let mut islands = 0;
    for i in 0..r {
        for j in 0..c {
            if grid[i][j] != b'#' || seen[i][j] {
                continue;
            }
            islands += 1;
            seen[i][j] = true;
            let mut stack = vec![(i as i64, j as i64)];
            while let Some((a, b)) = stack.pop() {
                for da in -1i64..=1 {
                    for db in -1i64..=1 {
                        let (x, y) = (a + da, b + db);
                        if x < 0 || y < 0 || x >= r as i64 || y >= c as i64 {
                            continue;
                        }
                        let (x, y) = (x as usize, y as usize);
                        if grid[x][y] == b'#' && !seen[x][y] {
                            seen[x][y] = true;
                            stack.push((x as i64, y as i64));
                        }
                    }
                }
            }
        }
    }
    println!("{}", islands);
}
