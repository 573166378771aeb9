//! A trace carried across the API server: the W3C `traceparent` of the span that wrote an
//! object, stamped on it as an annotation, so the reconcile of that write joins the trace.
//! Nothing here does anything unless the process exports traces (an OpenTelemetry layer).

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The annotation a traced write carries.
pub const TRACEPARENT: &str = "orkestra.orkspace.io/traceparent";

/// The current span's `traceparent` (`00-<trace>-<span>-<flags>`), when it is traced.
pub fn current() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let found = span.span_context();
    found.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            found.trace_id(),
            found.span_id(),
            found.trace_flags().to_u8()
        )
    })
}

/// Makes `span` a child of `traceparent`; says whether it was one (anything else, whoever
/// wrote it, is ignored: it decides only which trace a span joins).
pub fn follow(span: &tracing::Span, traceparent: &str) -> bool {
    let Some(remote) = parse(traceparent) else {
        return false;
    };
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    true
}

/// A version-00 `traceparent`, lowercase hex, with a trace and a span that are not all zero.
fn parse(text: &str) -> Option<SpanContext> {
    let parts: Vec<&str> = text.split('-').collect();
    let [version, trace, span, flags] = parts.as_slice() else {
        return None;
    };
    let hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if *version != "00" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_traceparent_is_followed() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse(good).unwrap();
        assert_eq!(context.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled() && context.is_remote());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        assert!(!follow(&tracing::Span::none(), "garbage"));
    }
}
