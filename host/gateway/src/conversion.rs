//! The conversion webhook (`POST /convert`, an `apiextensions.k8s.io/v1` ConversionReview):
//! each object is turned into the desired version by the CRD's declared paths. One object
//! that cannot be converted fails the whole review, as the API server requires, with a
//! message naming the object and the cause. The CRDs that ask for it (`updateCRD`) are
//! pointed at this webhook, with the gateway's CA, when the webhooks are registered.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::{Value, json};

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::{CompiledConversion, CompiledCrd};

use crate::registration::{Endpoint, MANAGER, Registration};
use crate::review::Counts;

/// The CRDs whose conversion this gateway serves.
pub fn crds(compiled: &Compiled) -> impl Iterator<Item = (&CompiledCrd, &CompiledConversion)> {
    let on = crate::serving::conversion(compiled);
    compiled
        .enabled()
        .filter(move |_| on)
        .filter_map(|crd| crd.conversion.as_deref().map(|c| (crd.as_ref(), c)))
}

#[derive(Clone)]
struct Shared {
    compiled: Arc<Compiled>,
    counts: Arc<Counts>,
}

/// The `/convert` route.
pub fn router(compiled: Arc<Compiled>, counts: Arc<Counts>) -> axum::Router {
    axum::Router::new()
        .route("/convert", post(convert))
        .with_state(Shared { compiled, counts })
}

async fn convert(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let began = std::time::Instant::now();
    let answer = review(&shared, &body);
    let ok = answer.0["response"]["result"]["status"] == "Success";
    shared.counts.conversions.record(ok, began.elapsed());
    answer
}

/// The ConversionReview's answer to `body`.
fn review(shared: &Shared, body: &Value) -> Json<Value> {
    let request = &body["request"];
    let uid = &request["uid"];
    let answer = |result: Value| {
        Json(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                    "response": {"uid": uid, "result": result, "convertedObjects": []}}),
        )
    };
    let failed = |message: String| {
        shared.counts.conversion_failed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(%message, "conversion failed");
        answer(json!({"status": "Failure", "message": message}))
    };
    let Some(desired) = request["desiredAPIVersion"].as_str() else {
        return failed("the review has no desiredAPIVersion".into());
    };
    let objects = request["objects"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut converted = Vec::with_capacity(objects.len());
    for object in objects {
        let group = object["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit_once('/'))
            .map(|(g, _)| g);
        let kind = object["kind"].as_str();
        let found = crds(&shared.compiled)
            .find(|(crd, _)| Some(crd.group.as_str()) == group && Some(crd.kind.as_str()) == kind);
        let Some((crd, conversion)) = found else {
            return failed(format!(
                "{} {} is not converted by Katalog {}",
                object["apiVersion"], object["kind"], shared.compiled.katalog.name
            ));
        };
        match conversion.convert(object, desired, &crd.notes) {
            Ok(out) => converted.push(out),
            Err(why) => {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                return failed(format!("{} {name}: {why}", crd.kind));
            }
        }
    }
    shared
        .counts
        .converted
        .fetch_add(converted.len() as u64, Ordering::Relaxed);
    let mut ok = answer(json!({"status": "Success"}));
    ok.0["response"]["convertedObjects"] = Value::Array(converted);
    ok
}

/// Points every CRD that asks for it (`updateCRD`) at the webhook, trusting `registration`'s
/// CA; a CRD already pointed there costs no write.
pub async fn point_crds(
    client: &kube::Client,
    compiled: &Compiled,
    registration: &Registration,
) -> Result<(), kube::Error> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api = Objects::<DynamicObject>::all_with(client.clone(), &resource);
    let ca = base64::engine::general_purpose::STANDARD.encode(&registration.ca_bundle);
    let client_config = match &registration.endpoint {
        Endpoint::Url(base) => json!({"url": format!("{}/convert", base.trim_end_matches('/')), "caBundle": ca}),
        Endpoint::Service { namespace, name } => json!({
            "service": {"namespace": namespace, "name": name, "path": "/convert", "port": 443}, "caBundle": ca,
        }),
    };
    let wanted =
        json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]}});
    for (crd, conversion) in crds(compiled).filter(|(_, c)| c.update_crd) {
        let name = crd.crd_name();
        let Some(current) = api.get_opt(&name).await? else {
            tracing::warn!(crd = %name, "conversion: the CRD is not installed; not pointed at the webhook");
            continue;
        };
        if current.data["spec"]["conversion"] == wanted {
            continue;
        }
        let patch = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": {"conversion": wanted},
        });
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&patch))
            .await?;
        tracing::info!(crd = %name, storage = %conversion.storage_version, "CRD conversion pointed at the gateway");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const KATALOG: &str = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: versions}
security:
  conversion: {enabled: true}
spec:
  crds:
    db:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Db, plural: dbs}
      admission:
        conversion:
          storageVersion: v1
          paths:
            - {from: v1alpha1, to: v1, spec: {replicas: '{{ .spec.size }}'}}
            - {from: v1, to: v1alpha1, spec: {size: '{{ .spec.replicas }}'}}
";

    async fn ask(objects: Value, desired: &str) -> Value {
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), KATALOG.to_string())]).unwrap();
        let app = router(Arc::new(compiled), Arc::default());
        let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                          "request": {"uid": "c-1", "desiredAPIVersion": desired, "objects": objects}});
        crate::review::answer(app, "/convert", body).await
    }

    #[tokio::test]
    async fn every_object_comes_back_in_the_desired_version() {
        let answer = ask(
            json!([{"apiVersion": "demo.orkestra.io/v1alpha1", "kind": "Db", "metadata": {"name": "a"}, "spec": {"size": 3}},
                   {"apiVersion": "demo.orkestra.io/v1", "kind": "Db", "metadata": {"name": "b"}, "spec": {"replicas": 1}}]),
            "demo.orkestra.io/v1",
        )
        .await;
        assert_eq!(answer["uid"], "c-1");
        assert_eq!(answer["result"]["status"], "Success");
        let out = answer["convertedObjects"].as_array().unwrap();
        assert_eq!(out[0]["apiVersion"], "demo.orkestra.io/v1");
        assert_eq!(out[0]["spec"]["replicas"], 3);
        assert_eq!(out[1]["spec"]["replicas"], 1);
    }

    #[tokio::test]
    async fn one_object_that_cannot_be_converted_fails_the_review_by_name() {
        let answer = ask(
            json!([{"apiVersion": "demo.orkestra.io/v1alpha1", "kind": "Db", "metadata": {"name": "a"}, "spec": {}}]),
            "demo.orkestra.io/v2",
        )
        .await;
        assert_eq!(answer["result"]["status"], "Failure");
        assert_eq!(
            answer["result"]["message"],
            "Db a: no conversion path from v1alpha1 to v2 is declared"
        );
        let stranger = ask(json!([{"apiVersion": "x.io/v1", "kind": "Y"}]), "x.io/v2").await;
        assert_eq!(stranger["result"]["status"], "Failure");
    }
}
