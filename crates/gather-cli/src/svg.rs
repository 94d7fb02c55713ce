//! `gather explain --svg FILE`: the explanation as a picture. Every tensor of the call is a grid
//! of cells (a 3-d tensor is a column of 2-d slices), drawn left to right: the inputs, then the
//! outputs. The values that move (the input of gather-like ops, `src`/`source` of scatter-like
//! ops) each get their own colour; every output cell is filled with the colour of the cell its
//! value came from (striped when a reduction combined several), and index cells with the colour
//! of the value they route. Cells nothing is written to stay grey.
//!
//! Each cell is an SVG `rect` with the id `<tensor>-<i>-<j>...` (`out-0-1`) and a tooltip saying
//! what it holds, so the picture can be checked by a program too.
//!
//! ```
//! use gather_cli::{explain::explain, opargs::OpOptions, svg::render};
//! use gather_cli::tensor_io::{parse_inline, Role};
//! let mut inputs = std::collections::BTreeMap::new();
//! inputs.insert("input".to_string(), parse_inline("[10, 20, 30]", Role::Data, None).unwrap());
//! inputs.insert("index".to_string(), parse_inline("[2, 0]", Role::Index, None).unwrap());
//! let opts = OpOptions { dim: Some("0".into()), ..Default::default() };
//! let svg = render(&explain("gather", &opts, inputs).unwrap()).unwrap();
//! assert!(svg.starts_with("<svg"));
//! assert!(svg.contains(r##"id="out-0""##));
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use crate::compare::Flat;
use crate::explain::{Cell, Explanation, unravel};
use crate::fail::{CliResult, Failure};

const CELL: f64 = 40.0;
const GAP: f64 = 36.0;
const MARGIN: f64 = 20.0;
const TITLE: f64 = 28.0;
const SLICE_GAP: f64 = 22.0;
/// The fill of cells that carry no colour of their own.
pub const NEUTRAL: &str = "#e6e6e6";

/// The most cells drawn along each axis, by rank: longer axes show their leading block.
fn limits(rank: usize) -> Vec<usize> {
    match rank {
        0 | 1 => vec![16],
        2 => vec![12, 16],
        _ => vec![4, 8, 8],
    }
}

/// The colour of cell `i` of a tensor whose cells have their own colours: hues spread by the
/// golden angle, so neighbours differ clearly; lightness varies after every 24 cells.
///
/// ```
/// let a = gather_cli::svg::colour(0);
/// assert_eq!(a.len(), 7);
/// assert_ne!(a, gather_cli::svg::colour(1));
/// ```
pub fn colour(i: usize) -> String {
    let hue = (i as f64 * 137.508) % 360.0;
    let light = [0.62, 0.45, 0.76][(i / 24) % 3];
    let sat = 0.72;
    let (r, g, b) = hsl(hue, sat, light);
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn hsl(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to(r), to(g), to(b))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The id of a cell: `<tensor>-<coordinates>` (a 0-d tensor's single cell is `<tensor>-0`).
///
/// ```
/// assert_eq!(gather_cli::svg::cell_id("out", &[2, 3], 4), "out-1-1");
/// assert_eq!(gather_cli::svg::cell_id("value", &[], 0), "value-0");
/// ```
pub fn cell_id(name: &str, shape: &[usize], flat: usize) -> String {
    let coords = if shape.is_empty() {
        vec![0]
    } else {
        unravel(flat, shape)
    };
    let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
    format!("{name}-{}", parts.join("-"))
}

struct Panel<'a> {
    name: String,
    flat: Option<&'a Flat>,
    /// The single value of a `value` panel.
    text: Option<String>,
    shape: Vec<usize>,
    /// (slices, rows, cols) drawn.
    drawn: (usize, usize, usize),
    cut: bool,
}

impl Panel<'_> {
    fn width(&self) -> f64 {
        let w = self.drawn.2 as f64 * CELL;
        let title = (self.title().chars().count() as f64) * 7.2;
        w.max(title).max(CELL)
    }

    fn height(&self) -> f64 {
        let (s, r, _) = self.drawn;
        let slice_label = if self.shape.len() == 3 {
            SLICE_GAP
        } else {
            0.0
        };
        TITLE + s as f64 * (r as f64 * CELL + slice_label) + if self.cut { 18.0 } else { 0.0 }
    }

    fn title(&self) -> String {
        match &self.text {
            Some(_) => "value".into(),
            None => format!("{} {}", self.name, gather::error::fmt_shape(&self.shape)),
        }
    }
}

fn panel<'a>(name: &str, flat: &'a Flat) -> CliResult<Panel<'a>> {
    let rank = flat.shape.len();
    if rank > 3 {
        return Err(Failure::input(format!(
            "--svg draws tensors of up to 3 dims, but {name} has {rank} dims {}",
            gather::error::fmt_shape(&flat.shape)
        ))
        .with_hint("the text explanation works for any rank; draw a 3-d slice of the data"));
    }
    let lim = limits(rank);
    let shape = &flat.shape;
    let take = |a: usize| shape[a].min(lim[a]);
    let drawn = match rank {
        0 => (1, 1, 1),
        1 => (1, 1, take(0)),
        2 => (1, take(0), take(1)),
        _ => (take(0), take(1), take(2)),
    };
    let cut = (0..rank).any(|a| shape[a] > lim[a]);
    Ok(Panel {
        name: name.to_string(),
        flat: Some(flat),
        text: None,
        shape: shape.clone(),
        drawn,
        cut,
    })
}

/// Draws `e` as an SVG document.
pub fn render(e: &Explanation) -> CliResult<String> {
    let mut panels = Vec::new();
    for (name, f) in &e.inputs {
        panels.push(panel(name, f)?);
    }
    if let Some(v) = &e.value {
        panels.push(Panel {
            name: "value".into(),
            flat: None,
            text: Some(v.clone()),
            shape: vec![],
            drawn: (1, 1, 1),
            cut: false,
        });
    }
    for (name, f) in &e.outputs {
        panels.push(panel(name, f)?);
    }
    let palette: HashSet<&str> = e.palette.iter().map(String::as_str).collect();
    let colour_of = |c: &Cell| -> String {
        if palette.contains(c.0.as_str()) {
            colour(c.1)
        } else {
            NEUTRAL.to_string()
        }
    };
    let tints: BTreeMap<(String, usize), Vec<String>> = e
        .tints
        .iter()
        .map(|t| (t.cell.clone(), t.from.iter().map(&colour_of).collect()))
        .collect();

    let width = MARGIN * 2.0
        + panels.iter().map(Panel::width).sum::<f64>()
        + GAP * (panels.len().saturating_sub(1)) as f64;
    let body_height = panels.iter().map(Panel::height).fold(0.0, f64::max);
    let height = MARGIN * 2.0 + body_height + 24.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="monospace" font-size="13">"##,
        w = width.ceil(),
        h = height.ceil()
    );
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        width.ceil(),
        height.ceil()
    );
    let _ = writeln!(s, r##"<title>{}</title>"##, escape(&e.header));
    let mut x0 = MARGIN;
    for p in &panels {
        let _ = writeln!(s, r##"<g class="tensor" data-name="{}">"##, escape(&p.name));
        let _ = writeln!(
            s,
            r##"<text x="{x0}" y="{}" font-weight="bold">{}</text>"##,
            MARGIN + 16.0,
            escape(&p.title())
        );
        let (slices, rows, cols) = p.drawn;
        let mut y = MARGIN + TITLE;
        for sl in 0..slices {
            if p.shape.len() == 3 {
                let _ = writeln!(
                    s,
                    r##"<text x="{x0}" y="{}" fill="#555555">[{sl}]</text>"##,
                    y + 15.0
                );
                y += SLICE_GAP;
            }
            for r in 0..rows {
                for c in 0..cols {
                    let coords: Vec<usize> = match p.shape.len() {
                        0 => vec![],
                        1 => vec![c],
                        2 => vec![r, c],
                        _ => vec![sl, r, c],
                    };
                    let (flat, text) = match (p.flat, &p.text) {
                        (Some(f), _) => {
                            let i = crate::explain::ravel(&coords, &f.shape).unwrap_or(0);
                            (i, f.show(i))
                        }
                        (None, Some(t)) => (0, t.clone()),
                        (None, None) => (0, String::new()),
                    };
                    let key = (p.name.clone(), flat);
                    let fills: Vec<String> = if palette.contains(p.name.as_str()) {
                        vec![colour(flat)]
                    } else {
                        tints
                            .get(&key)
                            .cloned()
                            .filter(|f| !f.is_empty())
                            .unwrap_or_else(|| vec![NEUTRAL.to_string()])
                    };
                    let (cx, cy) = (x0 + c as f64 * CELL, y + r as f64 * CELL);
                    let id = cell_id(&p.name, &p.shape, flat);
                    let tip = format!(
                        "{}{} = {text}",
                        p.name,
                        if coords.is_empty() {
                            String::new()
                        } else {
                            format!("{coords:?}")
                        }
                    );
                    let _ = writeln!(
                        s,
                        r##"<rect id="{id}" x="{cx}" y="{cy}" width="{CELL}" height="{CELL}" fill="{}" stroke="#ffffff" stroke-width="2"><title>{}</title></rect>"##,
                        fills[0],
                        escape(&tip)
                    );
                    // Further contributors of a reduction: vertical stripes on the right.
                    if fills.len() > 1 {
                        let n = fills.len() as f64;
                        for (k, f) in fills.iter().enumerate().skip(1) {
                            let sx = cx + CELL * k as f64 / n;
                            let _ = writeln!(
                                s,
                                r##"<rect x="{sx:.2}" y="{}" width="{:.2}" height="{}" fill="{f}"/>"##,
                                cy + 1.0,
                                CELL / n - if k + 1 == fills.len() { 1.0 } else { 0.0 },
                                CELL - 2.0
                            );
                        }
                    }
                    let shown: String = if text.chars().count() > 6 {
                        text.chars().take(5).collect::<String>() + "…"
                    } else {
                        text
                    };
                    let _ = writeln!(
                        s,
                        r##"<text x="{}" y="{}" text-anchor="middle" dominant-baseline="central">{}</text>"##,
                        cx + CELL / 2.0,
                        cy + CELL / 2.0,
                        escape(&shown)
                    );
                }
            }
            y += rows as f64 * CELL;
        }
        if p.cut {
            let _ = writeln!(
                s,
                r##"<text x="{x0}" y="{}" fill="#555555">showing the leading {} of {}</text>"##,
                y + 14.0,
                escape(&gather::error::fmt_shape(&match p.shape.len() {
                    1 => vec![cols],
                    2 => vec![rows, cols],
                    _ => vec![slices, rows, cols],
                })),
                escape(&gather::error::fmt_shape(&p.shape))
            );
        }
        let _ = writeln!(s, "</g>");
        x0 += p.width() + GAP;
    }
    let _ = writeln!(
        s,
        r##"<text x="{MARGIN}" y="{}" fill="#333333">{}</text>"##,
        height - MARGIN + 4.0,
        escape(&e.header)
    );
    s.push_str("</svg>\n");
    Ok(s)
}
