//! The span of a stale answer, in a test binary of its own.
//!
//! `tracing` caches each callsite's interest for the whole process. While a
//! test's scoped subscriber is the only one registered, a callsite first
//! reached on another test's thread (one with no subscriber) is cached as
//! never enabled, and the scoped subscriber then misses that span. With
//! this test alone in its binary, no other thread reaches the callsite
//! first. The rest of the stale fallback is tested in `stale.rs`.

mod stale_common;
mod support;

use budget_core::Budget;
use stale_common::{GOOD, stale_dep};
use support::{Answer, Partner, ms};

/// The fields of every span opened, by span name.
#[derive(Clone, Default)]
struct Spans(std::sync::Arc<std::sync::Mutex<Vec<Opened>>>);

/// A span's name and its fields as recorded when it opened.
type Opened = (String, Vec<(String, String)>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Fields<'a>(&'a mut Vec<(String, String)>);
        impl tracing::field::Visit for Fields<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push((field.name().to_owned(), format!("{value:?}")));
            }
        }
        let mut fields = Vec::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.lock().unwrap().push((name, fields));
    }
}

#[test]
fn a_stale_answer_has_a_span_with_the_dependency_and_the_age() {
    use budget_core::telemetry::semconv::{
        BUDGET_DEPENDENCY, BUDGET_OUTCOME, BUDGET_STALE_AGE_MS, OUTCOME_STALE, STALE_SPAN,
    };
    use tracing_subscriber::layer::SubscriberExt;

    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let partner =
                Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(503)]).await;
            let client = stale_dep(&partner.url("/stock")).build().unwrap();
            let send = || client.get("").budget(Budget::new(ms(2000))).send();
            assert_eq!(send().await.unwrap().stale(), None);
            assert!(send().await.unwrap().stale().is_some());
        })
    });
    let spans = spans.0.lock().unwrap().clone();
    let stale: Vec<_> = spans
        .iter()
        .filter(|(name, _)| name == STALE_SPAN)
        .collect();
    assert_eq!(stale.len(), 1, "one stale answer, one span: {spans:?}");
    let field = |key: &str| {
        stale[0]
            .1
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field(BUDGET_DEPENDENCY).as_deref(), Some("\"inventory\""));
    assert_eq!(
        field(BUDGET_OUTCOME).as_deref(),
        Some(&*format!("{OUTCOME_STALE:?}"))
    );
    let age: i64 = field(BUDGET_STALE_AGE_MS).unwrap().parse().unwrap();
    assert!((0..5000).contains(&age), "{age}");
}
