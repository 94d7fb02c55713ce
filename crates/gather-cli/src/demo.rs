//! `gather demo`: the scenarios of DESIGN.md's table, each on small built-in data with the typed
//! API: the input, the call as Rust code, and the output.
//!
//! ```
//! let mut out = Vec::new();
//! gather_cli::demo::run(&mut out).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.contains("output [2, 2] = [[10, 30], [50, 40]]"));
//! ```

use std::fmt::Display;
use std::io::Write;

use gather::prelude::*;
use ndarray::{Array, Array1, Array2, Array3, ArrayBase, Axis, Data, Dimension, array};

/// A failure of the demo (a bug: the demo's data are fixed), as a message.
type DemoResult = Result<(), String>;

/// Prints every scenario to `out`.
///
/// ```
/// let mut out = Vec::new();
/// gather_cli::demo::run(&mut out).unwrap();
/// assert!(String::from_utf8(out).unwrap().contains("hint: "));
/// ```
pub fn run(out: &mut dyn Write) -> DemoResult {
    seed(out)?;
    topk_patches(out)?;
    mae_masking(out)?;
    token_logits(out)?;
    roi_labels(out)?;
    head_selection(out)?;
    gather_gradient(out)?;
    roi_mistake(out)
}

fn io(e: std::io::Error) -> String {
    format!("cannot write the demo: {e}")
}

fn err(e: gather::Error) -> String {
    format!("the demo failed (a bug): {e}")
}

fn title(out: &mut dyn Write, n: usize, text: &str) -> DemoResult {
    writeln!(out, "\n== {n}. {text} ==").map_err(io)
}

fn say(out: &mut dyn Write, text: &str) -> DemoResult {
    writeln!(out, "{text}").map_err(io)
}

/// `name [shape] = ...`: on one line when short, else ndarray's layout indented below.
fn show<A: Display, S: Data<Elem = A>, D: Dimension>(
    out: &mut dyn Write,
    name: &str,
    a: &ArrayBase<S, D>,
) -> DemoResult {
    let text = format!("{a}");
    let shape = gather::error::fmt_shape(a.shape());
    let one_line: Vec<&str> = text.lines().map(str::trim).collect();
    let one_line = one_line.join(" ");
    if a.ndim() <= 2 && one_line.len() <= 72 {
        writeln!(out, "{name} {shape} = {one_line}").map_err(io)
    } else {
        writeln!(out, "{name} {shape} =").map_err(io)?;
        for line in text.lines() {
            writeln!(out, "{}", format!("    {line}").trim_end()).map_err(io)?;
        }
        Ok(())
    }
}

/// Prints the call, as Rust code, indented under `call:`.
fn code(out: &mut dyn Write, lines: &[&str]) -> DemoResult {
    say(out, "call:")?;
    for l in lines {
        writeln!(out, "    {l}").map_err(io)?;
    }
    Ok(())
}

fn broadcast_error(what: &str) -> String {
    format!("the demo failed (a bug): cannot broadcast {what}")
}

/// The positions of the `k` largest scores of each row, best first (ties: lower position first).
/// Plain Rust here; `topk` in the library does the same job.
fn top_k_rows(scores: &Array2<f32>, k: usize) -> Array2<i64> {
    let mut idx = Array2::<i64>::zeros((scores.nrows(), k));
    for (r, row) in scores.rows().into_iter().enumerate() {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        for (j, &p) in order.iter().take(k).enumerate() {
            idx[[r, j]] = p as i64;
        }
    }
    idx
}

/// Per row, the positions that sort the row ascending (a plain stable sort; `argsort` in the
/// library does the same job).
fn argsort_rows<T: Copy + PartialOrd>(a: &Array2<T>) -> Array2<i64> {
    let mut idx = Array2::<i64>::zeros(a.raw_dim());
    for (r, row) in a.rows().into_iter().enumerate() {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&x, &y| {
            row[x]
                .partial_cmp(&row[y])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (j, &p) in order.iter().enumerate() {
            idx[[r, j]] = p as i64;
        }
    }
    idx
}

fn seed(out: &mut dyn Write) -> DemoResult {
    title(out, 1, "Basic 2-D gather: out[i][j] = x[i][index[i][j]]")?;
    let x = array![[10, 20, 30], [40, 50, 60]];
    let index = array![[0i64, 2], [1, 0]];
    show(out, "x", &x)?;
    show(out, "index", &index)?;
    code(out, &["let out = x.gather(1, &index)?;"])?;
    let y = x.gather(1, &index).map_err(err)?;
    show(out, "output", &y)
}

fn topk_patches(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        2,
        "Top-k patch selection: keep the K best of N patches of D features",
    )?;
    let (b, n, d, k) = (2, 5, 3, 2);
    // patches[b][n][d] = 100 b + 10 n + d, so every value says where it came from.
    let patches = Array3::from_shape_fn((b, n, d), |(b, n, d)| (100 * b + 10 * n + d) as f32);
    let scores = array![[0.1f32, 0.9, 0.3, 0.7, 0.2], [0.5, 0.4, 0.8, 0.1, 0.6]];
    say(
        out,
        "patches[b][n][d] = 100 b + 10 n + d (B = 2 images of N = 5 patches of D = 3)",
    )?;
    show(out, "patches", &patches)?;
    show(out, "scores", &scores)?;
    // The K best positions per row, picked in plain Rust (the library's topk does this job).
    let top = top_k_rows(&scores, k);
    say(out, "top: the 2 best positions of each row, best first")?;
    show(out, "top", &top)?;
    code(
        out,
        &[
            "let idx = top.view().insert_axis(Axis(2));        // [B, K, 1]",
            "let idx = idx.broadcast((2, 2, 3)).unwrap();      // [B, K, D], stride 0: not copied",
            "let picked = patches.gather(1, &idx)?;            // [B, K, D]",
        ],
    )?;
    let idx = top.view().insert_axis(Axis(2));
    let idx = idx
        .broadcast((b, k, d))
        .ok_or_else(|| broadcast_error("top"))?;
    let picked = patches.gather(1, &idx).map_err(err)?;
    show(out, "output", &picked)
}

fn mae_masking(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        3,
        "MAE random masking: keep a random half of the tokens, then restore the order",
    )?;
    let (n, l, d, keep) = (2, 6, 2, 3);
    let x = Array3::from_shape_fn((n, l, d), |(n, l, d)| (100 * n + 10 * l + d) as f32);
    let noise = array![
        [0.62f32, 0.11, 0.93, 0.35, 0.48, 0.07],
        [0.29, 0.84, 0.56, 0.02, 0.71, 0.40]
    ];
    say(
        out,
        "x[n][l][d] = 100 n + 10 l + d (N = 2 samples of L = 6 tokens of D = 2)",
    )?;
    show(out, "x", &x)?;
    show(out, "noise", &noise)?;
    // argsort in plain Rust (the library's argsort does this job).
    let ids_shuffle = argsort_rows(&noise);
    let ids_restore = argsort_rows(&ids_shuffle);
    say(
        out,
        "ids_shuffle = argsort(noise) and ids_restore = argsort(ids_shuffle), in plain Rust:",
    )?;
    show(out, "ids_shuffle", &ids_shuffle)?;
    show(out, "ids_restore", &ids_restore)?;
    code(
        out,
        &[
            "let ids_keep = ids_shuffle.slice(s![.., ..3]);    // [N, keep]",
            "let idx = ids_keep.insert_axis(Axis(2));",
            "let kept = x.gather(1, &idx.broadcast((2, 3, 2)).unwrap())?;   // [N, keep, D]",
            "let mut mask = Array2::<f32>::ones((2, 6));       // 1 = removed",
            "mask.slice_mut(s![.., ..3]).fill(0.0);            // 0 = kept (shuffled order)",
            "let mask = mask.gather(1, &ids_restore)?;         // back in token order",
        ],
    )?;
    let ids_keep = ids_shuffle.slice(ndarray::s![.., ..keep]);
    let idx = ids_keep.insert_axis(Axis(2));
    let idx = idx
        .broadcast((n, keep, d))
        .ok_or_else(|| broadcast_error("ids_keep"))?;
    let kept = x.gather(1, &idx).map_err(err)?;
    let mut mask = Array2::<f32>::ones((n, l));
    mask.slice_mut(ndarray::s![.., ..keep]).fill(0.0);
    let mask = mask.gather(1, &ids_restore).map_err(err)?;
    show(out, "kept", &kept)?;
    show(out, "mask", &mask)
}

fn token_logits(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        4,
        "Token scores: the logit of each target token, logits [B, L, V], labels [B, L]",
    )?;
    let logits = Array3::from_shape_vec(
        (2, 3, 4),
        vec![
            0.1f32, 2.0, -1.0, 0.5, 1.5, 0.2, 0.3, -0.4, 0.0, 0.9, 3.1, 0.7, //
            -2.0, 0.4, 1.2, 0.8, 0.6, -0.1, 0.2, 2.5, 1.1, 1.3, -0.6, 0.05,
        ],
    )
    .map_err(|e| format!("the demo failed (a bug): {e}"))?;
    let labels = array![[1i64, 0, 2], [2, 3, 1]];
    show(out, "logits", &logits)?;
    show(out, "labels", &labels)?;
    code(
        out,
        &[
            "let picked = logits.gather(-1, &labels.view().insert_axis(Axis(2)))?  // [B, L, 1]",
            "    .remove_axis(Axis(2));                                           // [B, L]",
        ],
    )?;
    let picked = logits
        .gather(-1, &labels.view().insert_axis(Axis(2)))
        .map_err(err)?
        .remove_axis(Axis(2));
    show(out, "output", &picked)
}

/// `roi_loc[r][c][k] = 1000 r + 10 c + k`: box regression of R regions for 21 classes.
fn roi_data() -> (Array3<f32>, Array1<i64>) {
    let roi = Array3::from_shape_fn((3, 21, 4), |(r, c, k)| (1000 * r + 10 * c + k) as f32);
    (roi, array![7i64, 0, 20])
}

fn roi_labels(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        5,
        "Per-region box regression: the 4 box values of each region's class",
    )?;
    let (roi, labels) = roi_data();
    say(
        out,
        "roi_loc [3, 21, 4] with roi_loc[r][c][k] = 1000 r + 10 c + k",
    )?;
    show(out, "labels", &labels)?;
    code(
        out,
        &[
            "let idx = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));  // [R, 1, 1]",
            "let idx = idx.broadcast((3, 1, 4)).unwrap();                        // [R, 1, 4]",
            "let boxes = roi_loc.gather(1, &idx)?.remove_axis(Axis(1));          // [R, 4]",
        ],
    )?;
    let idx = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
    let idx = idx
        .broadcast((3, 1, 4))
        .ok_or_else(|| broadcast_error("labels"))?;
    let boxes = roi.gather(1, &idx).map_err(err)?.remove_axis(Axis(1));
    show(out, "output", &boxes)
}

fn head_selection(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        6,
        "Attention-head selection: K of the heads of each sample, mha [B, heads, L, H]",
    )?;
    let (b, heads, l, h, k) = (2, 4, 3, 2, 2);
    let mha: Array<f32, _> = Array::from_shape_fn((b, heads, l, h), |(b, n, l, e)| {
        (1000 * b + 100 * n + 10 * l + e) as f32
    });
    let chosen = array![[3i64, 1], [0, 2]];
    say(
        out,
        "mha [2, 4, 3, 2] with mha[b][head][l][e] = 1000 b + 100 head + 10 l + e",
    )?;
    say(out, "chosen: the heads to keep for each sample")?;
    show(out, "chosen", &chosen)?;
    code(
        out,
        &[
            "let idx = chosen.view().insert_axis(Axis(2)).insert_axis(Axis(3));  // [B, K, 1, 1]",
            "let idx = idx.broadcast((2, 2, 3, 2)).unwrap();                     // [B, K, L, H]",
            "let picked = mha.gather(1, &idx)?;                                  // [B, K, L, H]",
        ],
    )?;
    let idx = chosen.view().insert_axis(Axis(2)).insert_axis(Axis(3));
    let idx = idx
        .broadcast((b, k, l, h))
        .ok_or_else(|| broadcast_error("chosen"))?;
    let picked = mha.gather(1, &idx).map_err(err)?;
    show(out, "output", &picked)
}

fn gather_gradient(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        7,
        "The gradient of gather is scatter_add: every read sends its gradient back",
    )?;
    let x = array![[10.0f32, 20.0, 30.0], [40.0, 50.0, 60.0]];
    let index = array![[0i64, 0], [2, 1]];
    let y = x.gather(1, &index).map_err(err)?;
    show(out, "x", &x)?;
    show(out, "index", &index)?;
    say(out, "y = x.gather(1, &index) reads x[0][0] twice:")?;
    show(out, "y", &y)?;
    let grad = array![[1.0f32, 2.0], [3.0, 4.0]];
    show(out, "grad_y", &grad)?;
    code(
        out,
        &["let grad_x = gather::scatter_add(&Array2::<f32>::zeros((2, 3)), 1, &index, &grad_y)?;"],
    )?;
    let grad_x =
        gather::scatter_add(&Array2::<f32>::zeros((2, 3)), 1, &index, &grad).map_err(err)?;
    show(out, "output", &grad_x)
}

fn roi_mistake(out: &mut dyn Write) -> DemoResult {
    title(
        out,
        8,
        "An error that teaches: scenario 5 with the labels passed as they are",
    )?;
    let (roi, labels) = roi_data();
    code(
        out,
        &["let boxes = roi_loc.gather(1, &labels)?;    // labels [3], roi_loc [3, 21, 4]"],
    )?;
    match roi.gather(1, &labels) {
        Ok(_) => Err("the demo failed (a bug): the wrong call succeeded".into()),
        Err(e) => {
            for line in format!("error: {e}").lines() {
                say(out, line)?;
            }
            Ok(())
        }
    }
}
