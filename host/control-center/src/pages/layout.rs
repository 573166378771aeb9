//! The page shell: header, navigation, breadcrumbs, the styles, and the script that keeps
//! a page current (it asks for the page's content again every few seconds, as a fragment,
//! and puts it in place; a hidden tab asks nothing). Everything a runtime says is escaped
//! by the templates; the script only ever inserts what this server rendered.

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::csrf::{self, Token};

pub use crate::config::BASE;

/// How a page is answered: the whole page, or only its content (the script's refresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Page,
    Fragment,
}

/// One step of the breadcrumbs: text and, except for the last, a link.
pub struct Crumb {
    pub text: String,
    pub href: Option<String>,
}

pub fn crumb(text: impl Into<String>, href: impl Into<String>) -> Crumb {
    Crumb {
        text: text.into(),
        href: Some(href.into()),
    }
}

pub fn here(text: impl Into<String>) -> Crumb {
    Crumb {
        text: text.into(),
        href: None,
    }
}

/// The hidden field every form carries: this browser's CSRF token.
pub fn csrf_field(token: &Token) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(token.0); }
}

/// A page around `content`; `refresh` keeps the content current; `signed_in` (with the
/// token its sign-out form carries) when there is a session to end.
pub fn page(
    title: &str,
    crumbs: &[Crumb],
    content: Markup,
    shape: Shape,
    refresh: bool,
    signed_in: Option<&Token>,
) -> Markup {
    if shape == Shape::Fragment {
        return content;
    }
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Orkestra Control Center" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    a.brand href={(BASE) "/"} { "Orkestra" span { " Control Center" } }
                    nav {
                        a href={(BASE) "/"} { "Dashboard" }
                        a href={(BASE) "/runtimes"} { "Runtimes" }
                        @if let Some(token) = signed_in {
                            form.inline method="post" action={(BASE) "/logout"} { (csrf_field(token)) button.link type="submit" { "Sign out" } }
                        }
                    }
                }
                div.crumbs {
                    @for (i, c) in crumbs.iter().enumerate() {
                        @if i > 0 { span.sep { "›" } }
                        @match &c.href {
                            Some(href) => a href=(href) { (c.text) },
                            None => span.current { (c.text) },
                        }
                    }
                    span.updated { "updated " span #updated { "now" } }
                }
                main #content data-refresh=[refresh.then_some("1")] { (content) }
                script src={(BASE) "/app.js"} {}
            }
        }
    }
}

/// The script of every page.
pub const SCRIPT: &str = r#"(function () {
  var main = document.getElementById('content');
  var stamp = document.getElementById('updated');
  if (!main || !main.dataset.refresh) return;
  function refresh() {
    if (document.hidden) return;
    var url = new URL(window.location.href);
    url.searchParams.set('fragment', '1');
    fetch(url, {credentials: 'same-origin'}).then(function (r) {
      if (r.status === 401) { window.location.reload(); return null; }
      return r.ok ? r.text() : null;
    }).then(function (text) {
      if (text === null) return;
      main.innerHTML = text;
      stamp.textContent = new Date().toLocaleTimeString();
    }).catch(function () { stamp.textContent = 'offline (retrying)'; });
  }
  setInterval(refresh, 5000);
})();
"#;

/// A state as a coloured badge.
pub fn badge(state: &str) -> Markup {
    let class = match state {
        "healthy" | "ready" | "up" | "Serving" | "true" => "ok",
        "degraded" | "unreachable" | "false" | "failed" | "not ready" => "bad",
        "gated" => "gated",
        "pending" | "started" | "follower" | "warning" | "rolling out" => "wait",
        _ => "plain",
    };
    html! { span class={"badge " (class)} { (state) } }
}

/// A small labelled figure.
pub fn figure(label: &str, value: impl std::fmt::Display) -> Markup {
    html! { div.figure { div.value { (value.to_string()) } div.label { (label) } } }
}

/// JSON, indented, escaped.
/// A value as table text: a string as it is, nothing as `-`, anything else as JSON.
pub fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An object's fields as rows of a table (`none` when it has none).
pub fn pairs(value: &serde_json::Value) -> Markup {
    let fields: Vec<_> = value.as_object().into_iter().flatten().collect();
    html! {
        @if fields.is_empty() {
            p.muted { "none" }
        } @else {
            // Keys are the API's camelCase names: shown as written, not as a header.
            table { @for (key, field) in fields { tr { td.key { (key) } td { (text(field)) } } } }
        }
    }
}

pub fn json_block(value: &serde_json::Value) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    html! { pre.json { (text) } }
}

/// A message in place of content that could not be had.
pub fn notice(text: &str) -> Markup {
    html! { p.notice { (text) } }
}

const STYLE: &str = r#"
:root { --bg: #f6f7f9; --card: #fff; --ink: #1d2330; --muted: #6b7385; --line: #e2e5ea;
  --ok: #1f8f4e; --bad: #c93636; --wait: #b7791f; --gated: #7b4fc9; --accent: #2b5fd9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--ink); }
header { display: flex; align-items: center; justify-content: space-between; padding: 10px 24px; background: #141a26; color: #fff; }
header a { color: #fff; text-decoration: none; margin-left: 18px; }
.brand { font-weight: 700; font-size: 16px; margin-left: 0; } .brand span { font-weight: 400; opacity: .8; }
nav { display: flex; align-items: center; }
form.inline { display: inline; margin-left: 18px; }
button.link { background: none; border: 0; color: #fff; cursor: pointer; font: inherit; padding: 0; }
.crumbs { padding: 10px 24px; color: var(--muted); display: flex; gap: 8px; align-items: center; }
.crumbs a { color: var(--accent); text-decoration: none; } .crumbs .current { color: var(--ink); font-weight: 600; }
.crumbs .updated { margin-left: auto; font-size: 12px; }
main { padding: 0 24px 32px; }
h1 { font-size: 20px; margin: 8px 0 16px; } h2 { font-size: 15px; margin: 24px 0 10px; color: #343b4a; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 14px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
.card h3 { margin: 0 0 8px; font-size: 15px; display: flex; justify-content: space-between; align-items: center; }
.card a { color: var(--accent); text-decoration: none; }
.card.state-gated { border-left: 4px solid var(--gated); } .card.state-degraded { border-left: 4px solid var(--bad); }
.card.state-healthy { border-left: 4px solid var(--ok); } .card.state-pending, .card.state-started { border-left: 4px solid var(--wait); }
.figures { display: flex; gap: 18px; flex-wrap: wrap; margin: 6px 0; }
.figure .value { font-size: 18px; font-weight: 600; } .figure .label { font-size: 11px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); background: #fafbfc; }
td.key { color: var(--muted); font-family: ui-monospace, monospace; font-size: 12px; }
td a { color: var(--accent); text-decoration: none; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: var(--muted); }
.badge.plain { background: #8a92a3; } .badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); } .badge.wait { background: var(--wait); } .badge.gated { background: var(--gated); }
.bar { height: 6px; background: var(--line); border-radius: 3px; overflow: hidden; margin-top: 4px; } .bar > div { height: 100%; background: var(--accent); }
.bar.hot > div { background: var(--bad); }
.muted { color: var(--muted); } .why { color: var(--gated); font-size: 12px; } .error { color: var(--bad); font-size: 12px; word-break: break-word; }
pre.json { background: #0f1420; color: #d7def0; padding: 12px; border-radius: 6px; overflow: auto; max-height: 420px; font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 14px; }
@media (max-width: 900px) { .charts { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
.chart svg { width: 100%; height: 120px; } .chart .title { font-size: 12px; color: var(--muted); display: flex; justify-content: space-between; }
.graph svg { max-width: 100%; height: auto; } main a { color: var(--accent); } .notice { padding: 12px; background: #fff7e6; border: 1px solid #f0d9a8; border-radius: 6px; }
form.add { display: flex; gap: 8px; flex-wrap: wrap; margin: 10px 0 20px; } input { padding: 6px 8px; border: 1px solid var(--line); border-radius: 4px; font: inherit; }
button.primary { background: var(--accent); color: #fff; border: 0; border-radius: 4px; padding: 6px 14px; cursor: pointer; font: inherit; }
button.danger { background: none; color: var(--bad); border: 1px solid var(--bad); border-radius: 4px; padding: 2px 10px; cursor: pointer; }
.login { max-width: 340px; margin: 80px auto; } .login input { width: 100%; margin: 6px 0 12px; }
form.create { max-width: 480px; } form.create label { display: flex; flex-direction: column; gap: 4px; margin: 10px 0; } form.create select { padding: 6px 8px; font: inherit; } .created { color: #15803d; font-weight: 600; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; } @media (max-width: 900px) { .two { grid-template-columns: 1fr; } }
"#;
