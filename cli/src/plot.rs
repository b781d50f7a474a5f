//! Minimal SVG line charts (no dependency): enough for the benchmark's figures.

use std::fmt::Write as _;

use filterstore::filter::FilterKind;

/// How a series is drawn.
#[derive(Clone, Debug)]
pub enum Style {
    /// A dashed polyline.
    Dashed,
    /// Markers only.
    Points,
    /// A polyline with markers and vertical error bars (± the given half-widths).
    ErrorBars(Vec<f64>),
}

/// One named series of (x, y) points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// SVG colour.
    pub color: &'static str,
    /// Points.
    pub points: Vec<(f64, f64)>,
    /// Drawing style.
    pub style: Style,
}

/// One chart panel.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// Title above the panel.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
    /// Put the legend in the lower right corner instead of the upper right.
    pub legend_bottom: bool,
}

/// Colour of a filter kind in every chart.
pub fn kind_color(k: FilterKind) -> &'static str {
    match k {
        FilterKind::None => "#555555",
        FilterKind::Bloom => "#1f77b4",
        FilterKind::BlockedBloom => "#2ca02c",
        FilterKind::Cuckoo => "#d62728",
        FilterKind::BinaryFuse => "#9467bd",
        FilterKind::Global => "#ff7f0e",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        return (a..=b)
            .map(|e| 10f64.powi(e))
            .filter(|t| *t >= lo * 0.999 && *t <= hi * 1.001)
            .collect();
    }
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(mag * 10.0);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(t);
        t += step;
    }
    out
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 || v.abs() < 0.01 {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Renders panels side by side into one SVG document.
pub fn render(panels: &[Chart], panel_w: f64, panel_h: f64) -> String {
    let mut s = String::new();
    let w = panel_w * panels.len() as f64;
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{panel_h}" viewBox="0 0 {w} {panel_h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, c) in panels.iter().enumerate() {
        draw(&mut s, c, i as f64 * panel_w, panel_w, panel_h);
    }
    s.push_str("</svg>\n");
    s
}

fn draw(s: &mut String, c: &Chart, ox: f64, w: f64, h: f64) {
    let (ml, mr, mt, mb) = (70.0, 20.0, 34.0, 48.0);
    let tx = |v: f64| if c.log_x { v.log10() } else { v };
    let ty = |v: f64| if c.log_y { v.log10() } else { v };
    let usable = |x: f64, y: f64| {
        (!c.log_x || x > 0.0) && (!c.log_y || y > 0.0) && x.is_finite() && y.is_finite()
    };
    let pts: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|&(x, y)| usable(x, y))
        .collect();
    if pts.is_empty() {
        return;
    }
    let (mut x0, mut x1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (mut y0, mut y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    if c.log_y {
        y0 = 10f64.powf(y0.log10().floor());
        y1 = 10f64.powf(y1.log10().ceil());
    } else {
        y0 = y0.min(0.0);
        y1 = if y1 > y0 { y1 * 1.05 } else { y0 + 1.0 };
    }
    if c.log_x {
        x0 = 10f64.powf(x0.log10().floor());
        x1 = 10f64.powf(x1.log10().ceil());
    } else if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let px = |x: f64| ox + ml + (tx(x) - tx(x0)) / (tx(x1) - tx(x0)) * (w - ml - mr);
    let py = |y: f64| mt + (1.0 - (ty(y) - ty(y0)) / (ty(y1) - ty(y0))) * (h - mt - mb);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        ox + w / 2.0,
        esc(&c.title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{mt}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        ox + ml,
        w - ml - mr,
        h - mt - mb
    );
    for t in ticks(x0, x1, c.log_x) {
        let x = px(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{mt}" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            h - mb,
            h - mb + 15.0,
            fmt_tick(t)
        );
    }
    for t in ticks(y0, y1, c.log_y) {
        let y = py(t);
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            ox + ml,
            ox + w - mr,
            ox + ml - 5.0,
            y + 4.0,
            fmt_tick(t)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        ox + ml + (w - ml - mr) / 2.0,
        h - 10.0,
        esc(&c.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>"#,
        ox + 16.0,
        mt + (h - mt - mb) / 2.0,
        ox + 16.0,
        mt + (h - mt - mb) / 2.0,
        esc(&c.y_label)
    );
    // Series are clipped to the frame (error bars may reach past the axis range).
    let clip = format!("clip{}", ox as u64);
    let _ = writeln!(
        s,
        r#"<clipPath id="{clip}"><rect x="{}" y="{mt}" width="{}" height="{}"/></clipPath><g clip-path="url(#{clip})">"#,
        ox + ml,
        w - ml - mr,
        h - mt - mb
    );
    let mut legend = String::new();
    for (i, se) in c.series.iter().enumerate() {
        let p: Vec<(f64, f64)> = se
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| usable(x, y))
            .map(|(x, y)| (px(x), py(y)))
            .collect();
        let path = p
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect::<Vec<_>>()
            .join(" ");
        let col = se.color;
        match &se.style {
            Style::Dashed => {
                let _ = writeln!(
                    s,
                    r#"<polyline points="{path}" fill="none" stroke="{col}" stroke-width="1.2" stroke-dasharray="5,4"/>"#
                );
            }
            Style::Points => {}
            Style::ErrorBars(err) => {
                let _ = writeln!(
                    s,
                    r#"<polyline points="{path}" fill="none" stroke="{col}" stroke-width="1.5"/>"#
                );
                for (&(x, y), e) in se.points.iter().zip(err) {
                    if usable(x, y) && usable(x, y - e) {
                        let _ = writeln!(
                            s,
                            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{col}"/>"#,
                            px(x),
                            py(y - e),
                            py(y + e)
                        );
                    }
                }
            }
        }
        if !matches!(se.style, Style::Dashed) {
            for (x, y) in &p {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{col}"/>"#
                );
            }
        }
        let ly = if c.legend_bottom {
            h - mb - 10.0 - 16.0 * (c.series.len() - 1 - i) as f64
        } else {
            mt + 14.0 + 16.0 * i as f64
        };
        let lx = ox + w - mr - 170.0;
        let dash = if matches!(se.style, Style::Dashed) {
            r#" stroke-dasharray="5,4""#
        } else {
            ""
        };
        let _ = writeln!(
            legend,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{col}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 18.0,
            lx + 22.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</g>\n");
    // A light box behind the legend keeps it readable over the lines.
    let n = c.series.len() as f64;
    let top = if c.legend_bottom {
        h - mb - 10.0 - 16.0 * (n - 1.0)
    } else {
        mt + 14.0
    } - 10.0;
    let _ = writeln!(
        s,
        r#"<rect x="{}" y="{top}" width="166" height="{}" fill="white" fill-opacity="0.85"/>"#,
        ox + w - mr - 174.0,
        16.0 * n + 4.0
    );
    s.push_str(&legend);
}
