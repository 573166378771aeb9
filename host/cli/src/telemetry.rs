//! OpenTelemetry traces over OTLP, configured by the standard `OTEL_*` variables: on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) names a collector, unless
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. What is exported is the host's
//! own spans (a reconcile with its stages and component calls, a gateway apply), never its
//! log lines; the exporter batches them on a thread of its own.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The exporter, kept to flush what is batched at exit.
pub struct Telemetry(SdkTracerProvider);

impl Telemetry {
    /// Sends what is still batched, then stops the exporter.
    pub fn shutdown(self) {
        if let Err(error) = self.0.shutdown() {
            eprintln!("warning: the last traces were not all exported: {error}");
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the variables ask for traces.
fn wanted() -> bool {
    let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let exporter = var("OTEL_TRACES_EXPORTER").unwrap_or_else(|| "otlp".into());
    endpoint.is_some() && !disabled && exporter != "none"
}

/// The protocol the variables name (`http/protobuf` by default, as the specification says).
fn protocol() -> Result<Protocol, String> {
    let (name, value) = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
        Some(value) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", value),
        None => (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default(),
        ),
    };
    match value.as_str() {
        "" | "http/protobuf" => Ok(Protocol::HttpBinary),
        "http/json" => Ok(Protocol::HttpJson),
        "grpc" => Err(format!(
            "{name}=grpc: this ork exports over HTTP only; use http/protobuf (port 4318) or http/json"
        )),
        other => Err(format!("{name}={other}: expected http/protobuf or http/json")),
    }
}

/// The tracing layer that exports spans, when the variables ask for it; an error names the
/// variable that is wrong.
pub fn layer<S>() -> Result<Option<(impl Layer<S>, Telemetry)>, String>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    if !wanted() {
        return Ok(None);
    }
    let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
    if endpoint.as_deref().is_some_and(|e| e.starts_with("https://")) {
        return Err(
            "OTEL_EXPORTER_OTLP_ENDPOINT: this ork exports over plain http (a collector in the cluster or beside it, port 4318)".into(),
        );
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol()?)
        .build()
        .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: cannot export traces: {e}"))?;
    let mut resource = Resource::builder();
    if var("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("orkestra");
    }
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("orkestra");
    // The host's spans, its stages' included (debug); none of its log lines.
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.is_span() && meta.target().starts_with("orkestra") && *meta.level() <= tracing::Level::DEBUG
    });
    let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(ours);
    Ok(Some((layer, Telemetry(provider))))
}
