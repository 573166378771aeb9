//! The log records of the code under test, kept in memory so a test can assert what was
//! logged and how much: one process-wide subscriber, installed by the first test that asks.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, Once};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One log record.
#[derive(Debug, Clone)]
pub struct Record {
    pub target: String,
    pub level: tracing::Level,
    /// The record's fields but `message`, rendered as text, with those of the spans it
    /// was logged in (`crd`, `key`), as a text log shows them.
    pub fields: BTreeMap<String, String>,
    pub message: String,
}

impl Record {
    /// Bytes of the record as a text log would hold it, roughly: what flooding costs.
    pub fn len(&self) -> usize {
        self.target.len() + self.message.len() + self.fields.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Records past this are not kept (a flood would otherwise hold the test process's memory).
const KEPT: usize = 2_000_000;

static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// Starts capturing every record at INFO and above, once per process.
pub fn capture() {
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry()
            .with(Capture)
            .with(tracing_subscriber::filter::LevelFilter::INFO);
        // A test binary that installed another subscriber keeps it; then nothing is captured.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// The captured records `keep` accepts.
pub fn records(keep: impl Fn(&Record) -> bool) -> Vec<Record> {
    RECORDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| keep(r))
        .cloned()
        .collect()
}

struct Capture;

/// A span's fields, kept in its extensions for the events inside it.
struct SpanFields(BTreeMap<String, String>);

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &tracing::span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        // Outermost span first, so an inner span's field, then the event's own, wins.
        for span in ctx.event_scope(event).into_iter().flat_map(|scope| scope.from_root()) {
            if let Some(SpanFields(of_span)) = span.extensions().get::<SpanFields>() {
                fields
                    .fields
                    .extend(of_span.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        event.record(&mut fields);
        let record = Record {
            target: event.metadata().target().to_string(),
            level: *event.metadata().level(),
            fields: fields.fields,
            message: fields.message,
        };
        let mut records = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        if records.len() < KEPT {
            records.push(record);
        }
    }
}

#[derive(Default)]
struct Fields {
    fields: BTreeMap<String, String>,
    message: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.put(field, text);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }
}

impl Fields {
    fn put(&mut self, field: &Field, text: String) {
        if field.name() == "message" {
            self.message = text;
        } else {
            self.fields.insert(field.name().to_string(), text);
        }
    }
}
