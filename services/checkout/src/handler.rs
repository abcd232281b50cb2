//! `GET`/`POST /checkout`: inventory, then pricing, then (with a
//! database) the stock reservation, then recommendations, one after the
//! other, each spending what the previous ones left.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use budget_core::client::{BudgetClient, CallError, OptionalResponse, RequestBuilder};
use budget_core::ledger::{Ledger, stale_note};
use budget_core::problem::Problem;
use budget_core::retry::IDEMPOTENCY_KEY;
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method};
use serde_json::Value;
use service_kit::{BodyBytes, RequestLedger};

use crate::grpc_inventory::{self, GrpcInventory};
use crate::stock::{self, Stock};
use crate::{CheckoutAnswer, Degraded, X_REQUEST_ID};

/// The three clients, shared by every request.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) inventory: Inventory,
    pub(crate) pricing: BudgetClient,
    pub(crate) recommendations: BudgetClient,
    pub(crate) stock: Option<Stock>,
}

/// Inventory's client: HTTP, or gRPC when its URL is `grpc://...`.
#[derive(Debug)]
pub(crate) enum Inventory {
    Http(BudgetClient),
    Grpc(Box<GrpcInventory>),
}

/// The route handler.
///
/// With `budget_mode = on` the budget layer gives the request its budget
/// and ledger and adds the ledger to the response. With `off` there is no
/// layer: the handler keeps a ledger of its own (attempts and waits, for
/// the side-by-side tables) and adds it itself ([`RequestLedger`]).
pub(crate) async fn checkout(
    State(app): State<Arc<App>>,
    method: Method,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ledger: RequestLedger,
    BodyBytes(body): BodyBytes,
) -> Response {
    let call = Call {
        request_id: headers.get(X_REQUEST_ID).cloned(),
        ledger: ledger.ledger().clone(),
        sku: stock::sku_of(query.as_deref()),
    };
    // No header here: the layer in front (budget or ledger) adds the ledger.
    match run(&app, &call, &method, &headers, body).await {
        Ok(answer) => Json(answer).into_response(),
        Err(problem) => problem.into_response(),
    }
}

/// What every outbound call of one request carries.
struct Call {
    request_id: Option<HeaderValue>,
    ledger: Ledger,
    /// The sku the database step reserves.
    sku: i64,
}

impl Call {
    /// `req` with the request's `x-request-id` and ledger.
    fn prepare(&self, mut req: RequestBuilder) -> RequestBuilder {
        if let Some(id) = &self.request_id {
            req = req.header(X_REQUEST_ID, id.clone());
        }
        req.ledger(self.ledger.clone())
    }
}

async fn run(
    app: &App,
    call: &Call,
    method: &Method,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<CheckoutAnswer, Problem> {
    let mut degraded = Vec::new();
    let inventory = match &app.inventory {
        Inventory::Http(client) => required(call.prepare(client.get("")), &mut degraded).await?,
        Inventory::Grpc(client) => {
            let (value, age) = client.call(call.request_id.as_ref()).await?;
            if let Some(age) = age {
                degraded.push(stale(grpc_inventory::INVENTORY, age));
            }
            value
        }
    };

    let pricing = if method == Method::POST {
        // The inbound body and key go to pricing: without a key the POST is
        // not retried (docs/contract.md §2 rule 4), so it is sent once.
        let mut req = app.pricing.post("").body(body);
        for name in [CONTENT_TYPE, IDEMPOTENCY_KEY] {
            if let Some(value) = headers.get(&name) {
                req = req.header(name, value.clone());
            }
        }
        req
    } else {
        app.pricing.get("")
    };
    let pricing = required(call.prepare(pricing), &mut degraded).await?;
    if let Some(stock) = &app.stock {
        stock.reserve(call.sku, &call.ledger).await?;
    }

    let (recommendations, recommendations_degraded) = optional(
        call.prepare(app.recommendations.get("")),
        app.recommendations.name(),
    )
    .await;

    Ok(CheckoutAnswer {
        request_id: call
            .request_id
            .as_ref()
            .and_then(|id| id.to_str().ok())
            .map(str::to_owned),
        inventory,
        pricing,
        recommendations,
        degraded: degraded
            .into_iter()
            .chain(recommendations_degraded)
            .collect(),
    })
}

/// A required dependency's JSON, or the problem to answer with (docs/contract.md
/// §3, as [`CallError::problem`] maps it): `504` when it could not
/// be called in budget, the budget ran out or no usable answer came, its
/// own `429`/`503` with `Retry-After` when that wait did not fit, `503` with
/// `Retry-After` for an open circuit, `502` for an error status or a body
/// that is not JSON. A stale answer (`on_unavailable = "stale"`) is used,
/// and `degraded` says so.
async fn required(req: RequestBuilder, degraded: &mut Vec<Degraded>) -> Result<Value, Problem> {
    let result = match req.send().await {
        Ok(res) => {
            if let Some(age) = res.stale() {
                degraded.push(stale(res.dependency(), age));
            }
            res.error_for_status().and_then(|res| res.json())
        }
        Err(e) => Err(e),
    };
    result.map_err(|e| {
        tracing::warn!(dependency = e.dependency(), error = %service_kit::error_chain(&e), "required dependency failed");
        e.problem()
    })
}

/// An optional dependency's JSON, or why the answer is degraded without it.
/// Nothing it does fails the request.
async fn optional(req: RequestBuilder, name: &str) -> (Option<Value>, Option<Degraded>) {
    let failed = |e: CallError| {
        tracing::info!(dependency = e.dependency(), error = %service_kit::error_chain(&e), "optional dependency failed: degraded");
        Degraded {
            dependency: e.dependency().to_owned(),
            reason: format!("failed: {}", service_kit::error_chain(&e)),
        }
    };
    match req.send_optional().await {
        Ok(OptionalResponse::Answered(res)) => {
            let old = res.stale().map(|age| stale(res.dependency(), age));
            match res.error_for_status().and_then(|res| res.json()) {
                Ok(value) => (Some(value), old),
                Err(e) => (None, Some(failed(e))),
            }
        }
        // Not made (below its floor, circuit open): the skip says why, in
        // the words the client wrote in the ledger; the answer says the same.
        Ok(OptionalResponse::Skipped(skipped)) => {
            let reason = skipped.reason().to_owned();
            tracing::debug!(dependency = name, %reason, "optional dependency skipped: degraded");
            (
                None,
                Some(Degraded {
                    dependency: name.to_owned(),
                    reason,
                }),
            )
        }
        Err(e) => (None, Some(failed(e))),
    }
}

/// A dependency answered from a stale value `age` old: the reason is the
/// ledger's note (`stale 12s`).
fn stale(dependency: &str, age: Duration) -> Degraded {
    let reason = stale_note(age);
    tracing::info!(dependency, %reason, "dependency answered from a stale value: degraded");
    Degraded {
        dependency: dependency.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use budget_core::ledger::{Entry, parse_server_timing};

    use super::*;

    #[test]
    fn the_stale_reason_is_the_ledger_s_note() {
        let d = stale("inventory", Duration::from_millis(12_400));
        assert_eq!(
            (d.dependency.as_str(), d.reason.as_str()),
            ("inventory", "stale 12s")
        );
        let entry = Entry::stale("inventory", Duration::from_millis(12_400)).to_string();
        let desc = parse_server_timing(&entry).pop().and_then(|m| m.desc);
        assert_eq!(desc.as_deref(), Some(d.reason.as_str()));
        assert_eq!(
            stale("pricing", Duration::from_millis(40)).reason,
            "stale 40ms"
        );
    }

    #[tokio::test]
    async fn the_degraded_reason_is_the_skip_of_that_call_whatever_the_ledger_holds() {
        use budget_core::client::{DependencyConfig, OnUnavailable};
        use budget_core::{Budget, floor::Floor};

        let ledger = Ledger::new();
        ledger.record(Entry::skip("recommendations", "skipped: circuit open"));
        ledger.record(Entry::attempt(
            "pricing",
            1,
            Duration::from_millis(3),
            "200",
        ));
        ledger.record(Entry::skip("pricing", "skipped: 2ms < floor 10ms"));
        let mut c = DependencyConfig::new("recommendations", "http://127.0.0.1:9/recs");
        c.floor = Floor::new(Duration::from_secs(1)).into();
        c.on_unavailable = OnUnavailable::Skip;
        let recommendations = BudgetClient::builder(c).build().unwrap();
        let req = recommendations
            .get("")
            .budget(Budget::new(Duration::from_millis(850)))
            .ledger(ledger.clone());
        let (value, degraded) = optional(req, "recommendations").await;
        assert_eq!(value, None);
        let degraded = degraded.unwrap();
        assert_eq!(degraded.dependency, "recommendations");
        let reason = degraded.reason;
        assert!(
            reason.starts_with("skipped: 8") && reason.ends_with("ms < floor 1000ms"),
            "{reason}"
        );
        let Some(Entry::Skip { reason: noted, .. }) = ledger.entries().pop() else {
            panic!("the call's skip is the ledger's last entry");
        };
        assert_eq!(reason, noted, "the body says what the ledger says");
    }
}
