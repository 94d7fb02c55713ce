//! `gather explain --svg`: the picture is rendered by a real SVG renderer (resvg), and its
//! pixels are checked: every output cell has the colour of the input cell its value came from.
//!
//! Set `GATHER_SVG_PNG_DIR` to keep the rendered pictures as PNG files for a look.

use std::path::{Path, PathBuf};
use std::process::Command;

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Options, Tree};

fn gather(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gather"))
        .args(args)
        .output()
        .expect("the binary runs")
}

struct Picture {
    tree: Tree,
    pixmap: Pixmap,
}

impl Picture {
    /// Runs `gather explain ... --svg` and renders the file.
    fn of(name: &str, args: &[&str]) -> Picture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{name}.svg"));
        let mut all: Vec<&str> = vec!["explain"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--svg", path.to_str().unwrap()]);
        let o = gather(&all);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&path).unwrap();
        let tree = Tree::from_str(&text, &Options::default()).expect("a valid SVG document");
        let size = tree.size().to_int_size();
        let mut pixmap = Pixmap::new(size.width(), size.height()).expect("a non-empty picture");
        resvg::render(&tree, Transform::identity(), &mut pixmap.as_mut());
        if let Ok(keep) = std::env::var("GATHER_SVG_PNG_DIR") {
            let _ = pixmap.save_png(Path::new(&keep).join(format!("{name}.png")));
        }
        Picture { tree, pixmap }
    }

    /// The rendered colour of cell `id`, sampled inside its top-left corner (away from the
    /// number in its middle and from the stripes of a reduction on its right).
    fn colour(&self, id: &str) -> [u8; 4] {
        let node = self
            .tree
            .node_by_id(id)
            .unwrap_or_else(|| panic!("no cell {id}"));
        let b = node.abs_bounding_box();
        let (x, y) = ((b.x() + 6.0) as u32, (b.y() + 6.0) as u32);
        self.pixel(x, y)
    }

    /// The colour at the right edge of cell `id` (the last stripe of a reduction).
    fn colour_right(&self, id: &str) -> [u8; 4] {
        let b = self.tree.node_by_id(id).unwrap().abs_bounding_box();
        self.pixel((b.x() + b.width() - 5.0) as u32, (b.y() + 6.0) as u32)
    }

    fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let p = self.pixmap.pixel(x, y).expect("inside the picture");
        [p.red(), p.green(), p.blue(), p.alpha()]
    }

    fn has(&self, id: &str) -> bool {
        self.tree.node_by_id(id).is_some()
    }
}

fn id(name: &str, coords: &[usize]) -> String {
    let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
    format!("{name}-{}", parts.join("-"))
}

const GREY: [u8; 4] = [0xe6, 0xe6, 0xe6, 255];

/// Every drawn cell of `name` (of `shape`) has its own colour, different from the others and
/// from the grey of cells without one.
fn assert_distinct(p: &Picture, name: &str, cells: &[Vec<usize>]) {
    let mut seen = std::collections::HashMap::new();
    for c in cells {
        let col = p.colour(&id(name, c));
        assert_ne!(col, GREY, "{name}{c:?} is grey");
        assert_eq!(col[3], 255, "{name}{c:?} is not opaque");
        if let Some(other) = seen.insert(col, c.clone()) {
            panic!("{name}{c:?} and {name}{other:?} have the same colour {col:?}");
        }
    }
}

fn grid(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut i| {
            let mut c = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                c[d] = i % shape[d];
                i /= shape[d];
            }
            c
        })
        .collect()
}

#[test]
fn seed_picture_colours_each_output_cell_like_its_source() {
    let p = Picture::of(
        "seed",
        &[
            "gather",
            "--input",
            "[[10,20,30],[40,50,60]]",
            "--index",
            "[[0,2],[1,0]]",
            "--dim",
            "1",
        ],
    );
    assert_distinct(&p, "input", &grid(&[2, 3]));
    let index = [[0, 2], [1, 0]];
    for (i, row) in index.iter().enumerate() {
        for (j, &k) in row.iter().enumerate() {
            let src = p.colour(&id("input", &[i, k]));
            assert_eq!(p.colour(&id("out", &[i, j])), src, "out[{i}][{j}]");
            assert_eq!(p.colour(&id("index", &[i, j])), src, "index[{i}][{j}]");
        }
    }
    // out[0][1] = input[0][2] and not input[0][1]
    assert_ne!(p.colour("out-0-1"), p.colour("input-0-1"));
}

/// A 3-d gather along each dim, with an index that repeats and skips positions: the colours
/// follow `input[..index..]` computed here, independently of the command.
#[test]
fn three_d_pictures_follow_the_index_along_every_dim() {
    let shape = [2usize, 3, 4];
    let input: Vec<String> = (0..24).map(|v| v.to_string()).collect();
    let nested = |shape: &[usize], vals: &[String]| -> String {
        fn go(shape: &[usize], vals: &[String]) -> String {
            if shape.len() == 1 {
                return format!("[{}]", vals.join(","));
            }
            let step = vals.len() / shape[0];
            let parts: Vec<String> = vals.chunks(step).map(|c| go(&shape[1..], c)).collect();
            format!("[{}]", parts.join(","))
        }
        go(shape, vals)
    };
    for dim in 0..3usize {
        let ishape = [2usize, 2, 3];
        let size = shape[dim];
        let index: Vec<usize> = (0..12).map(|i| (i * 7 + dim) % size).collect();
        let index_text: Vec<String> = index.iter().map(|v| v.to_string()).collect();
        let dim_text = dim.to_string();
        let p = Picture::of(
            &format!("gather3d_dim{dim}"),
            &[
                "gather",
                "--input",
                &nested(&shape, &input),
                "--index",
                &nested(&ishape, &index_text),
                "--dim",
                &dim_text,
            ],
        );
        assert_distinct(&p, "input", &grid(&shape));
        for (n, c) in grid(&ishape).into_iter().enumerate() {
            let mut src = c.clone();
            src[dim] = index[n];
            assert_eq!(
                p.colour(&id("out", &c)),
                p.colour(&id("input", &src)),
                "dim {dim}, out{c:?}"
            );
        }
    }
}

#[test]
fn one_d_picture_and_a_large_input_drawn_as_its_leading_block() {
    let p = Picture::of(
        "gather1d",
        &[
            "gather",
            "--input",
            "[5,6,7,8]",
            "--index",
            "[3,3,0]",
            "--dim",
            "0",
        ],
    );
    assert_eq!(p.colour("out-0"), p.colour("input-3"));
    assert_eq!(p.colour("out-1"), p.colour("input-3"));
    assert_eq!(p.colour("out-2"), p.colour("input-0"));

    // 40 columns: the first 16 are drawn; output cells keep their sources' colours.
    let row: Vec<String> = (0..40).map(|v| v.to_string()).collect();
    let input = format!("[[{}]]", row.join(","));
    let p = Picture::of(
        "wide",
        &[
            "gather",
            "--input",
            &input,
            "--index",
            "[[15,0,7]]",
            "--dim",
            "1",
        ],
    );
    assert!(p.has("input-0-15") && !p.has("input-0-16"));
    assert_eq!(p.colour("out-0-0"), p.colour("input-0-15"));
    assert_eq!(p.colour("out-0-2"), p.colour("input-0-7"));
}

#[test]
fn scatter_picture_colours_written_cells_like_their_src_and_keeps_the_rest_grey() {
    let p = Picture::of(
        "scatter_add",
        &[
            "scatter_add",
            "--input",
            "[[0,0,0],[0,0,0]]",
            "--index",
            "[[0,2],[2,2]]",
            "--src",
            "[[1,2],[3,4]]",
            "--dim",
            "1",
        ],
    );
    assert_distinct(&p, "src", &grid(&[2, 2]));
    // out[0][0] and out[0][2] get one src element each, after the input (grey) stripe.
    assert_eq!(p.colour_right("out-0-0"), p.colour("src-0-0"));
    assert_eq!(p.colour_right("out-0-2"), p.colour("src-0-1"));
    // out[1][2] sums src[1][0] and src[1][1]: the last stripe is src[1][1].
    assert_eq!(p.colour_right("out-1-2"), p.colour("src-1-1"));
    // nothing lands on out[0][1], out[1][0], out[1][1]
    for c in ["out-0-1", "out-1-0", "out-1-1"] {
        assert_eq!(p.colour(c), GREY, "{c}");
    }

    // scatter (set): a cell written twice shows the write that is kept, the last one.
    let p = Picture::of(
        "scatter",
        &[
            "scatter", "--input", "[0,0,0]", "--index", "[2,0,2]", "--src", "[7,8,9]", "--dim", "0",
        ],
    );
    assert_eq!(p.colour("out-2"), p.colour("src-2"));
    assert_eq!(p.colour("out-0"), p.colour("src-1"));
    assert_eq!(p.colour("out-1"), GREY);
}

#[test]
fn ranks_above_three_are_refused_for_pictures_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("x.svg");
    let o = gather(&[
        "explain",
        "gather",
        "--input",
        "[[[[1]]]]",
        "--index",
        "[[[[0]]]]",
        "--dim",
        "0",
        "--svg",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("up to 3 dims"), "{err}");
    assert!(!path.exists());
}
