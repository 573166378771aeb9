//! The Control Center's create flow: a runtime's catalog of serve targets, a target's form
//! from its schema, and the submission, sent to the runtime's gateway as an intent.

use super::*;

/// The crumbs of a create page.
fn create_crumbs(rt: &str, target: Option<&str>) -> Vec<crate::pages::layout::Crumb> {
    let mut crumbs = vec![
        crumb("Dashboard", format!("{BASE}/")),
        crumb(rt, format!("{BASE}/r/{rt}")),
    ];
    match target {
        Some(target) => {
            crumbs.push(crumb("Create", format!("{BASE}/r/{rt}/create")));
            crumbs.push(here(target));
        }
        None => crumbs.push(here("Create")),
    }
    crumbs
}

/// The serve targets the runtime's Serve API offers the Control Center's token.
pub(super) async fn catalog_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path(rt): Path<String>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let catalog = match shared
        .runtimes
        .serve(&runtime, reqwest::Method::GET, "/schema", None)
        .await
    {
        Ok((200, body)) => Ok(body),
        Ok((status, body)) => Err(format!("the Serve API answered {status}: {}", refusal(&body))),
        Err(error) => Err(error.to_string()),
    };
    let content = create::catalog(&rt, catalog);
    answer(
        &shared,
        &token,
        "Create",
        &create_crumbs(&rt, None),
        content,
        Shape::Page,
    )
}

/// The runtime `rt` and the flat schema of its target, or the page that says why not.
async fn target_schema(
    shared: &Shared,
    token: &Token,
    rt: &str,
    target: &str,
) -> Result<(Arc<crate::runtimes::Watched>, serde_json::Value), Response> {
    let Some(runtime) = shared.runtimes.get(rt) else {
        return Err(unknown_runtime(shared, token, rt));
    };
    let plain = target
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let why = match plain {
        false => "not a target name".to_string(),
        true => match shared
            .runtimes
            .serve(
                &runtime,
                reqwest::Method::GET,
                &format!("/schema?target={target}"),
                None,
            )
            .await
        {
            Ok((200, schema)) => return Ok((runtime, schema)),
            Ok((status, body)) => format!("the Serve API answered {status}: {}", refusal(&body)),
            Err(error) => error.to_string(),
        },
    };
    let content = crate::pages::layout::notice(&format!("Target {target:?}: {why}"));
    let crumbs = create_crumbs(rt, Some(target));
    let page = answer(shared, token, "Create", &crumbs, content, Shape::Page);
    Err((StatusCode::NOT_FOUND, page).into_response())
}

/// Why the Serve API refused, from its answer.
fn refusal(body: &serde_json::Value) -> String {
    body["message"]
        .as_str()
        .or(body["error"].as_str())
        .unwrap_or("no reason given")
        .to_string()
}

pub(super) async fn form_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path((rt, target)): Path<(String, String)>,
) -> Response {
    let schema = match target_schema(&shared, &token, &rt, &target).await {
        Ok((_, schema)) => schema,
        Err(page) => return page,
    };
    let content = create::form(&rt, &target, &schema, &token, &Default::default(), None);
    answer(
        &shared,
        &token,
        "Create",
        &create_crumbs(&rt, Some(&target)),
        content,
        Shape::Page,
    )
}

/// A form applied as an intent through the Serve API; the form again with the outcome.
pub(super) async fn submit(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path((rt, target)): Path<(String, String)>,
    Form(form): Form<std::collections::HashMap<String, String>>,
) -> Response {
    let (runtime, schema) = match target_schema(&shared, &token, &rt, &target).await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let outcome = match create::intent_of(&target, &schema, &form) {
        Err(why) => create::Outcome::Refused {
            message: why,
            violations: Vec::new(),
        },
        Ok(intent) => {
            let intent = serde_json::Value::Object(intent);
            match shared
                .runtimes
                .serve(&runtime, reqwest::Method::POST, "/apply", Some(&intent))
                .await
            {
                Ok((200, body)) if body["accepted"] == true => create::Outcome::Accepted {
                    kind: body["kind"].as_str().unwrap_or_default().to_string(),
                    namespace: body["namespace"].as_str().map(String::from),
                    name: body["name"].as_str().unwrap_or_default().to_string(),
                },
                Ok((status, body)) => create::Outcome::Refused {
                    message: format!("the Serve API answered {status}: {}", refusal(&body)),
                    violations: body["violations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|v| {
                            format!(
                                "{}: {}",
                                v["field"].as_str().unwrap_or("?"),
                                v["message"].as_str().unwrap_or("")
                            )
                        })
                        .collect(),
                },
                Err(error) => create::Outcome::Refused {
                    message: error.to_string(),
                    violations: Vec::new(),
                },
            }
        }
    };
    let status = match outcome {
        create::Outcome::Accepted { .. } => StatusCode::OK,
        create::Outcome::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    let content = create::form(&rt, &target, &schema, &token, &form, Some(&outcome));
    let page = answer(
        &shared,
        &token,
        "Create",
        &create_crumbs(&rt, Some(&target)),
        content,
        Shape::Page,
    );
    (status, page).into_response()
}
