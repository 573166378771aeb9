//! Pictures drawn on the server as SVG: the line charts of the last hour, and the
//! `dependsOn` graph of a Katalog (CRDs in layers, each after what it depends on).

use std::collections::BTreeMap;
use std::fmt::Write;

use maud::{Markup, PreEscaped, html};

use crate::history::Series;

const WIDTH: f64 = 300.0;
const HEIGHT: f64 = 110.0;

/// The four charts of `series`.
pub fn charts(series: &Series) -> Markup {
    html! {
        div.charts {
            (chart("Reconciles per second", &series.reconcile_rate, ""))
            (chart("Error rate", &series.error_rate, "%"))
            (chart("Queue depth", &series.queue_depth, ""))
            (chart("p99 reconcile latency", &series.p99_ms, " ms"))
        }
    }
}

/// One line chart; gaps (the runtime down) break the line.
fn chart(title: &str, points: &[(f64, Option<f64>)], unit: &str) -> Markup {
    let latest = points.iter().rev().find_map(|(_, v)| *v);
    let max = points.iter().filter_map(|(_, v)| *v).fold(0.0_f64, f64::max);
    let top = if max <= 0.0 { 1.0 } else { max * 1.15 };
    let (first, last) = match (points.first(), points.last()) {
        (Some(first), Some(last)) => (first.0, last.0.max(first.0 + 1.0)),
        _ => (0.0, 1.0),
    };
    let x = |t: f64| (t - first) / (last - first) * WIDTH;
    let y = |v: f64| HEIGHT - v / top * (HEIGHT - 6.0);
    let mut path = String::new();
    // A run of one point (a single sample, or one between gaps) would draw nothing: it gets
    // a short stroke that the round cap turns into a dot.
    for run in points.split(|(_, v)| v.is_none()).filter(|run| !run.is_empty()) {
        let values = run.iter().filter_map(|(t, v)| v.map(|v| (*t, v)));
        for (i, (t, v)) in values.enumerate() {
            let _ = write!(path, "{}{:.1},{:.1} ", if i == 0 { "M" } else { "L" }, x(t), y(v));
        }
        if run.len() == 1 {
            path.push_str("h0.1 ");
        }
    }
    let now = match latest {
        Some(v) => format!("{}{unit}", round(v)),
        None => "no data yet".to_string(),
    };
    let svg = format!(
        r##"<svg viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" aria-label="{title}"><line x1="0" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}" stroke="#e2e5ea"/><path d="{path}" fill="none" stroke="#2b5fd9" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round" vector-effect="non-scaling-stroke"/></svg>"##
    );
    html! {
        div.card.chart {
            div.title { span { (title) } span { (now) " · max " (round(max)) (unit) } }
            (PreEscaped(svg))
        }
    }
}

fn round(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One CRD of the dependency graph.
pub struct Node<'a> {
    pub name: &'a str,
    pub state: &'a str,
    /// `(dependency, condition, met)`.
    pub depends_on: Vec<(&'a str, &'a str, bool)>,
}

/// The `dependsOn` graph: a CRD sits one layer right of the deepest CRD it depends on;
/// an edge is solid once its condition is met, dashed while it is not.
pub fn dependency_graph(nodes: &[Node<'_>]) -> Markup {
    let mut layer: BTreeMap<&str, usize> = nodes.iter().map(|n| (n.name, 0)).collect();
    // Longest path from a root; at most as many rounds as nodes (a cycle was refused at load).
    for _ in 0..nodes.len() {
        for node in nodes {
            let deepest = node
                .depends_on
                .iter()
                .filter_map(|(d, _, _)| layer.get(d).map(|l| l + 1))
                .max()
                .unwrap_or(0);
            layer.insert(node.name, deepest);
        }
    }
    let mut rows: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for node in nodes {
        rows.entry(layer[node.name]).or_default().push(node.name);
    }
    let (box_w, box_h, gap_x, gap_y) = (150.0, 34.0, 60.0, 16.0);
    let mut position: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (column, names) in &rows {
        for (row, name) in names.iter().enumerate() {
            let x = 10.0 + *column as f64 * (box_w + gap_x);
            let y = 10.0 + row as f64 * (box_h + gap_y);
            position.insert(name, (x, y));
        }
    }
    let width = 20.0 + rows.len() as f64 * (box_w + gap_x);
    let height = 20.0 + rows.values().map(Vec::len).max().unwrap_or(1) as f64 * (box_h + gap_y);
    let mut svg = format!(
        r##"<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="dependsOn graph"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#6b7385"/></marker></defs>"##
    );
    for node in nodes {
        let (tx, ty) = position[node.name];
        for (dependency, condition, met) in &node.depends_on {
            let Some((fx, fy)) = position.get(dependency) else {
                continue;
            };
            let dash = if *met { "" } else { r#" stroke-dasharray="5,4""# };
            let _ = write!(
                svg,
                r##"<line x1="{:.0}" y1="{:.0}" x2="{:.0}" y2="{:.0}" stroke="#6b7385" stroke-width="1.4"{dash} marker-end="url(#arrow)"><title>{} after {} is {}</title></line>"##,
                fx + box_w,
                fy + box_h / 2.0,
                tx,
                ty + box_h / 2.0,
                escape(node.name),
                escape(dependency),
                escape(condition)
            );
        }
    }
    for node in nodes {
        let (x, y) = position[node.name];
        let colour = match node.state {
            "healthy" => "#1f8f4e",
            "degraded" => "#c93636",
            "gated" => "#7b4fc9",
            _ => "#b7791f",
        };
        let _ = write!(
            svg,
            r##"<g><rect x="{x:.0}" y="{y:.0}" width="{box_w}" height="{box_h}" rx="6" fill="#fff" stroke="{colour}" stroke-width="2"/><text x="{:.0}" y="{:.0}" font-size="12" text-anchor="middle" fill="#1d2330">{}</text><text x="{:.0}" y="{:.0}" font-size="10" text-anchor="middle" fill="{colour}">{}</text></g>"##,
            x + box_w / 2.0,
            y + 15.0,
            escape(node.name),
            x + box_w / 2.0,
            y + 28.0,
            escape(node.state)
        );
    }
    svg.push_str("</svg>");
    html! { div.card.graph { (PreEscaped(svg)) } }
}

/// Text for SVG written by hand (the names come from a runtime).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_sits_left_of_what_depends_on_it_and_names_are_escaped() {
        let nodes = [
            Node {
                name: "app",
                state: "pending",
                depends_on: vec![("db", "healthy", false)],
            },
            Node {
                name: "db",
                state: "healthy",
                depends_on: vec![],
            },
            Node {
                name: "<evil>",
                state: "healthy",
                depends_on: vec![],
            },
        ];
        let svg = dependency_graph(&nodes).into_string();
        assert!(svg.contains("&lt;evil&gt;") && !svg.contains("<evil>"), "{svg}");
        assert!(svg.contains("stroke-dasharray"), "an unmet dependency is dashed");
        let x_of = |name: &str| {
            let at = svg.find(&format!(">{name}</text>")).unwrap();
            let rect = svg[..at].rfind("<rect x=\"").unwrap();
            svg[rect + 9..].split('"').next().unwrap().parse::<f64>().unwrap()
        };
        assert!(x_of("db") < x_of("app"));
    }

    #[test]
    fn a_chart_breaks_its_line_where_the_runtime_was_down() {
        let points = [(0.0, Some(1.0)), (10.0, Some(2.0)), (20.0, None), (30.0, Some(1.0))];
        let svg = chart("Queue depth", &points, "").into_string();
        let path = svg.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(path.matches('M').count(), 2, "two runs of the line: {path}");
        assert_eq!(path.matches('h').count(), 1, "the lone last point is a dot: {path}");
        assert!(svg.contains("1.00"), "the latest value: {svg}");
    }
}
